#include "datagen/shards/spill_buckets.h"

#include <zstd.h>

#include <algorithm>
#include <memory>

#include <tbb/parallel_for.h>

#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "datagen/shards/bert_spill_record.h"

namespace pretrain {

namespace {
constexpr int kSpillLevel = 1;  // zstd's: ~0.64 of the bytes at ~180 MB/s a core here; 3 is ~0.55 at half that
}  // namespace

SpillBuckets::SpillBuckets(std::string dir, const nlohmann::json& key)
    : dir_(std::move(dir)), meta_(path_join(dir_, "spill.json")), key_(key) {}

void SpillBuckets::start(size_t count, int pieces) {
  counts_.assign(count, 0);
  pieces_ = pieces;
}

std::string SpillBuckets::path(size_t b) const { return path_join(dir_, cat("bucket-", b, ".bin")); }

std::string SpillBuckets::piece_path(size_t b, int piece) const {
  return pieces_ == 1 ? path(b) : path_join(dir_, cat("bucket-", b, ".", piece, ".bin"));
}

bool SpillBuckets::present(size_t b) const {
  for (int p = 0; p < pieces_; ++p)
    if (!file_exists(piece_path(b, p))) return false;
  return true;
}

std::string SpillBuckets::read(size_t b) const {
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::vector<std::string> pieces;
  size_t total = 0;
  for (int p = 0; p < pieces_; ++p) pieces.push_back(read_file(piece_path(b, p)));
  // The frames' sizes first: the records are decompressed into one buffer of their size.
  struct Frame {
    const char* data;
    size_t bytes, size;
  };
  std::vector<Frame> frames;
  for (int p = 0; p < pieces_; ++p) {
    const std::string& in = pieces[size_t(p)];
    for (size_t at = 0; at < in.size();) {
      const size_t bytes = ZSTD_findFrameCompressedSize(in.data() + at, in.size() - at);
      const unsigned long long size = ZSTD_getFrameContentSize(in.data() + at, in.size() - at);
      if (ZSTD_isError(bytes) || size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > kSpillFrame)
        throw Error(Where::at_offset(piece_path(b, p), int64_t(at)), "expected a zstd frame of spill records");
      frames.push_back({in.data() + at, bytes, size_t(size)});
      total += size_t(size);
      at += bytes;
    }
  }
  std::string data(total, '\0');
  size_t out = 0;
  for (const Frame& f : frames) {
    const size_t got = ZSTD_decompressDCtx(dctx.get(), data.data() + out, f.size, f.data, f.bytes);
    if (ZSTD_isError(got) || got != f.size)
      throw Error(Where{path(b)}, cat("a damaged zstd frame of spill records: ", ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short"));
    out += got;
  }
  return data;
}

void SpillBuckets::free(size_t b) const {
  for (int p = 0; p < pieces_; ++p) std::remove(piece_path(b, p).c_str());
}

bool SpillBuckets::load_complete(size_t bins) {
  if (!file_exists(meta_)) return false;
  try {
    auto meta = nlohmann::json::parse(read_file(meta_));
    if (meta.at("key") == key_ && json_integer_or<int>(meta, "format", 1) == kSpillFormat) {
      std::vector<uint64_t> counts = json_integers<uint64_t>(meta.at("counts"));
      if (counts.empty() || counts.size() % bins != 0) return false;
      counts_ = std::move(counts);
      pieces_ = json_integer_or<int>(meta, "pieces", 1);
      return true;
    }
  } catch (const std::exception&) {
  }
  return false;
}

void SpillBuckets::mark_complete() const {
  nlohmann::json meta = {{"key", key_}, {"format", kSpillFormat}, {"counts", counts_}};
  if (pieces_ > 1) meta["pieces"] = pieces_;  // absent in one process: its spill.json stays as it was
  write_file_atomic(meta_, meta.dump() + "\n");
}

std::optional<std::vector<int64_t>> SpillBuckets::load_rows() const {
  const std::string rows = path_join(dir_, "rows.json");
  if (!file_exists(rows)) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(read_file(rows));
    if (j.at("key") == key_ && j.at("rows").size() == count()) return json_integers<int64_t>(j.at("rows"));
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

void SpillBuckets::save_rows(const std::vector<int64_t>& rows) const {
  write_file_atomic(path_join(dir_, "rows.json"), nlohmann::json{{"key", key_}, {"rows", rows}}.dump() + "\n");
}

void SpillBuckets::gone(size_t b) const {
  throw Error(Where{path(b)}, "this spill bucket was freed once the shards it fed were written, but one of them is "
                              "to be written again (not listed, or it no longer verifies): run again without "
                              "--resume (--keep-work keeps the buckets)");
}

SpillWriter::SpillWriter(const SpillBuckets& buckets, int piece)
    : files_(buckets.count(), nullptr), pending_(buckets.count()), frames_(buckets.count()) {
  for (size_t b = 0; b < buckets.count(); ++b) {
    paths_.push_back(buckets.piece_path(b, piece));
    files_[b] = std::fopen(paths_.back().c_str(), "wb");
    if (!files_[b]) throw_errno("cannot create", paths_.back());
  }
}

SpillWriter::~SpillWriter() {
  for (std::FILE* f : files_)
    if (f) std::fclose(f);
}

void SpillWriter::append(const std::vector<std::string>& records) {
  std::vector<size_t> full;
  for (size_t b = 0; b < records.size(); ++b) {
    if (records[b].empty()) continue;
    pending_[b] += records[b];
    if (pending_[b].size() >= kSpillFrame) full.push_back(b);
  }
  if (!full.empty()) write(full);
}

namespace {

// `n` bytes at `data` as one zstd frame, appended to `out`.
void compress_frame(const char* data, size_t n, std::string& out, const std::string& path) {
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  const size_t before = out.size();
  out.resize(before + ZSTD_compressBound(n));
  const size_t got = ZSTD_compressCCtx(cctx.get(), out.data() + before, out.size() - before, data, n, kSpillLevel);
  if (ZSTD_isError(got)) throw Error(Where{path}, cat("zstd: ", ZSTD_getErrorName(got)));
  out.resize(before + got);
}

}  // namespace

void SpillWriter::write(const std::vector<size_t>& buckets, bool last) {
  // Compressing is most of the work: the buckets' frames in parallel, each bucket's in order.
  tbb::parallel_for(size_t{0}, buckets.size(), [&](size_t i) {
    const size_t b = buckets[i];
    const size_t whole = last ? pending_[b].size() : pending_[b].size() / kSpillFrame * kSpillFrame;
    frames_[b].clear();
    for (size_t at = 0; at < whole; at += kSpillFrame)
      compress_frame(pending_[b].data() + at, std::min(kSpillFrame, whole - at), frames_[b], paths_[b]);
    pending_[b].erase(0, whole);
  });
  for (size_t b : buckets)
    if (std::fwrite(frames_[b].data(), 1, frames_[b].size(), files_[b]) != frames_[b].size())
      throw_errno("cannot write", paths_[b]);
}

void SpillWriter::close() {
  std::vector<size_t> left;
  for (size_t b = 0; b < pending_.size(); ++b)
    if (!pending_[b].empty()) left.push_back(b);
  write(left, true);  // the last frames, whatever their size
  for (size_t b = 0; b < files_.size(); ++b) {
    const int closed = std::fclose(files_[b]);
    files_[b] = nullptr;
    if (closed != 0) throw_errno("cannot write", paths_[b]);
  }
}

}  // namespace pretrain
