#include "datagen/wikiprep/rank_parts.h"

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/error.h"
#include "common/json_integer.h"
#include "common/log.h"

namespace pretrain {

using nlohmann::json;

std::string rank_parts_dir(const std::string& output_dir) { return path_join(output_dir, ".work"); }

std::string rank_part_path(const std::string& output_dir, int rank, int ranks) {
  return path_join(output_dir, cat(".work/wikiprep-part-", rank, "-of-", ranks));
}

RankPartSink::RankPartSink(std::string part, WikiprepFormat format)
    : part_(std::move(part)), data_(part_ + ".data"), format_(format) {}

void RankPartSink::add(const CleanDocument& document) {
  line_.clear();
  invalid_ += serialize_document(format_, document, line_);
  data_.write(line_);
  sizes_.push_back(line_.size());
  text_bytes_ += shard_bytes_of(format_, line_.size());
}

void RankPartSink::add_serialized(std::string_view, uint64_t) { throw std::logic_error("RankPartSink::add_serialized"); }

void RankPartSink::commit() {
  data_.commit();
  AtomicFile sizes(part_ + ".sizes");
  sizes.write(sizes_.data(), sizes_.size() * sizeof(uint64_t));
  sizes.commit();
}

RankPartReader::RankPartReader(const std::string& part) : path_(part + ".data"), file_(std::fopen(path_.c_str(), "rb")) {
  if (!file_) throw_errno("cannot open", path_);
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
}

void RankPartReader::skip(uint64_t bytes) {
  if (::fseeko(file_, static_cast<off_t>(bytes), SEEK_CUR) != 0) throw_errno("cannot seek in", path_);
}

std::string_view RankPartReader::next(uint64_t size) {
  doc_.resize(size);
  if (std::fread(doc_.data(), 1, size, file_) != size)
    throw Error(Where{path_}, cat("expected ", size, " more bytes of a document (the part is shorter than its sizes say)"));
  return doc_;
}

std::vector<uint64_t> read_part_sizes(const std::string& part) {
  std::string bytes = read_file(part + ".sizes");
  if (bytes.size() % sizeof(uint64_t) != 0) throw Error(Where{part + ".sizes"}, "expected a whole number of 8-byte sizes");
  std::vector<uint64_t> sizes(bytes.size() / sizeof(uint64_t));
  std::memcpy(sizes.data(), bytes.data(), bytes.size());
  return sizes;
}

void write_part_summary(const std::string& part, const json& summary) { write_file_atomic(part + ".json", summary.dump()); }

bool load_done_part(const std::string& part, const json& key, json& summary, std::vector<uint64_t>& sizes) {
  try {
    if (!file_exists(part + ".json")) return false;
    summary = json::parse(read_file(part + ".json"));
    if (summary.value("key", json()) != key) return false;
    sizes = read_part_sizes(part);
    uint64_t total = 0;
    for (uint64_t n : sizes) total += n;
    return sizes.size() == json_integer<uint64_t>(summary["documents"]) && total == json_integer<uint64_t>(summary["data_bytes"]) &&
           file_exists(part + ".data") && file_size(part + ".data") == total;
  } catch (const std::exception& e) {
    log_warn(part, ".json: not kept (", e.what(), ")");
    return false;
  }
}

void remove_rank_parts(const std::string& output_dir) {
  const std::string work = rank_parts_dir(output_dir);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(work, ec))
    if (entry.path().filename().string().starts_with("wikiprep-part-")) std::filesystem::remove(entry.path(), ec);
  if (std::filesystem::is_empty(work, ec) && !ec) std::filesystem::remove(work, ec);
}

}  // namespace pretrain
