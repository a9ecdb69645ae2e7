#include "datagen/shards/gpt_shards.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "common/communicator.h"
#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/progress.h"
#include "formats/llmc.h"
#include "formats/megatron.h"

namespace pretrain {

ShardFormat gpt_shard_format(const GptShardsOptions& o) {
  if (o.format == GptFormat::megatron) return {.name = kFormatMegatron, .extension = ".bin"};
  return {.name = kFormatLlmc, .extension = ".llmc.bin"};
}

void GptShardsOptions::check() const {
  if (vocab_size <= 0) throw UsageError(cat("a GPT vocabulary of ", vocab_size, " tokens"));
  if (chunk_bytes == 0) throw UsageError("the spread's chunk size must be positive");
}

namespace {

// Document intervals [first, second) of the store, as recorded.
using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [a, b] : v) {
    if (a >= b) continue;
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

// [lo, hi) less `done` (merged).
Intervals remaining(uint64_t lo, uint64_t hi, const Intervals& done) {
  Intervals out;
  uint64_t at = lo;
  for (const auto& [a, b] : done) {
    if (b <= at || a >= hi) continue;
    if (a > at) out.emplace_back(at, a);
    at = std::max(at, b);
  }
  if (at < hi) out.emplace_back(at, hi);
  return out;
}

}  // namespace

struct GptSplitsWriter::State {
  GptShardsOptions o;
  std::vector<GptSplit> splits;
  nlohmann::json key;
  const Communicator* ranks;
  std::vector<std::unique_ptr<ShardSeries>> series;
  std::vector<size_t> base;  // each split's first bucket
  struct Bucket {
    size_t split, shard;
    uint64_t documents, tokens = 0;  // tokens: known once planned
  };
  std::vector<Bucket> buckets;
  int token_bytes = 0;  // of the buckets: the store's
  uint64_t store_documents = 0;  // all of them, in the splits or not
  bool default_work = false;

  std::string dir() const { return o.work_dir; }
  std::string plan_path() const { return path_join(dir(), "plan.json"); }
  std::string tokens_path(size_t b) const { return path_join(dir(), cat("bucket-", b, ".tokens")); }
  std::string sizes_path(size_t b) const { return path_join(dir(), cat("bucket-", b, ".sizes")); }
  std::string record_path(int rank) const { return path_join(dir(), cat("spread-", rank, ".json")); }
  bool kept(size_t b) const { return series[buckets[b].split]->kept_entry(buckets[b].shard) != nullptr; }

  // plan.json of this key: the buckets' tokens and the width; false when there is none.
  bool load_plan() {
    if (!file_exists(plan_path())) return false;
    try {
      const nlohmann::json j = nlohmann::json::parse(read_file(plan_path()));
      if (j.at("key") != key || j.at("buckets").size() != buckets.size()) return false;
      for (size_t b = 0; b < buckets.size(); ++b) {
        if (json_integer<uint64_t>(j.at("buckets")[b].at(0)) != buckets[b].documents) return false;
        buckets[b].tokens = json_integer<uint64_t>(j.at("buckets")[b].at(1));
      }
      token_bytes = json_integer<int>(j.at("token_bytes"));
      store_documents = json_integer<uint64_t>(j.at("store_documents"));
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
  // The spread's records of this key, every rank's (of any rank count), merged.
  Intervals recorded() const {
    Intervals all;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir(), ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("spread-")) continue;
      try {
        const nlohmann::json j = nlohmann::json::parse(read_file(e.path().string()));
        if (j.at("key") != key) continue;
        for (const auto& iv : j.at("done"))
          all.emplace_back(json_integer<uint64_t>(iv.at(0)), json_integer<uint64_t>(iv.at(1)));
      } catch (const std::exception&) {
      }
    }
    return merged(all);
  }
  // The buckets a shard still to be written reads are there at their sizes.
  bool buckets_whole() const {
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (!file_exists(sizes_path(b)) || file_size(sizes_path(b)) != buckets[b].documents * 4) return false;
      if (!kept(b) && (!file_exists(tokens_path(b)) || file_size(tokens_path(b)) != buckets[b].tokens * uint64_t(token_bytes)))
        return false;
    }
    return true;
  }
  // Rank 0: a fresh plan from the store: every bucket's sizes file, the token files of the
  // shards to be written at their full sizes, then plan.json.
  void make_plan(const TokenStore& store) {
    std::filesystem::remove_all(dir());
    make_dirs(dir());
    token_bytes = store.token_bytes();
    store_documents = store.num_documents();
    nlohmann::json listed = nlohmann::json::array();
    for (size_t s = 0; s < splits.size(); ++s) {
      const std::vector<uint32_t>& docs = splits[s].documents;
      size_t next = 0;
      for (size_t k = 0; k < series[s]->count(); ++k) {
        const size_t b = base[s] + k;
        AtomicFile sizes(sizes_path(b));
        uint64_t tokens = 0;
        for (uint64_t i = 0; i < buckets[b].documents; ++i) {
          const uint64_t n = store.document_size(docs[next++]);
          if (n > UINT32_MAX) throw Error(cat("document ", docs[next - 1], " has ", n, " tokens, more than 2^32 - 1"));
          sizes.write_pod(uint32_t(n));
          tokens += n;
        }
        sizes.commit();
        buckets[b].tokens = tokens;
        listed.push_back({buckets[b].documents, tokens});
        if (kept(b)) continue;
        const int fd = ::open(tokens_path(b).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) throw_errno("cannot create", tokens_path(b));
        const bool sized = ::ftruncate(fd, off_t(tokens * uint64_t(token_bytes))) == 0;
        ::close(fd);
        if (!sized) throw_errno("cannot size", tokens_path(b));
      }
    }
    const nlohmann::json plan = {
        {"key", key}, {"token_bytes", token_bytes}, {"store_documents", store_documents}, {"buckets", listed}};
    write_file_atomic(plan_path(), plan.dump() + "\n");
  }
};

GptSplitsWriter::GptSplitsWriter(const GptShardsOptions& o, std::vector<GptSplit> splits, const nlohmann::json& key)
    : s_(std::make_unique<State>()) {
  o.check();
  if (splits.empty()) throw Error("internal: no GPT split to write");
  for (const GptSplit& split : splits) split.output.check();
  State& s = *s_;
  s.o = o;
  s.splits = std::move(splits);
  s.key = key;
  s.ranks = s.splits[0].output.ranks ? s.splits[0].output.ranks : &Communicator::self();
  if (s.o.work_dir.empty()) s.o.work_dir = path_join(s.splits[0].output.dir, ".gpt-work"), s.default_work = true;
  for (size_t k = 0; k < s.splits.size(); ++k) {
    const std::vector<uint64_t> sizes = equal_sizes(s.splits[k].documents.size(), s.splits[k].output.num_shards);
    s.series.push_back(std::make_unique<ShardSeries>(s.splits[k].output, gpt_shard_format(o), sizes));
    s.base.push_back(s.buckets.size());
    for (size_t shard = 0; shard < sizes.size(); ++shard) s.buckets.push_back({k, shard, sizes[shard]});
  }
}

GptSplitsWriter::~GptSplitsWriter() = default;

bool GptSplitsWriter::spread_done() const {
  State& s = *s_;
  uint8_t done = 0;
  if (s.ranks->rank() == 0 && s.load_plan()) {
    const Intervals r = s.recorded();
    done = s.store_documents == 0 || (r.size() == 1 && r[0].first == 0 && r[0].second >= s.store_documents);
  }
  s.ranks->broadcast(&done, 1, 0);
  if (done && !s.load_plan()) throw Error(Where{s.plan_path()}, "changed under this run");
  return done;
}

void GptSplitsWriter::spread(const TokenStore* store) {
  State& s = *s_;
  const Communicator& ranks = *s.ranks;
  if (spread_done()) return;
  if (!store) throw Error(Where{s.dir()}, "internal: the GPT spread needs the token store");
  // Rank 0: go on with an earlier run's plan, or begin afresh (only while nothing was spread: the
  // records' chunks are no longer in the store).
  std::string refused;
  if (ranks.rank() == 0) {
    const bool resume = s.splits[0].output.resume;
    if (resume && s.load_plan() && s.token_bytes == store->token_bytes() && s.store_documents == store->num_documents() &&
        s.buckets_whole()) {
      log_info(cat("--resume: going on with the GPT spread in ", s.dir()));
    } else if (resume && !s.recorded().empty()) {
      refused = cat(s.dir(), ": the spread's buckets are not whole, and the token store was partly freed as it was "
                             "spread: run again without --resume");
    } else {
      s.make_plan(*store);
    }
  }
  refused = ranks.broadcast_string(refused, 0);
  if (!refused.empty()) throw Error(refused);
  if (ranks.rank() != 0 && !s.load_plan()) throw Error(Where{s.plan_path()}, "expected the GPT spread's plan");
  const int width = s.token_bytes;
  // Where each document goes: its bucket and its offset there (in tokens).
  const uint64_t n = store->num_documents();
  constexpr uint32_t kNone = ~uint32_t{0};  // a document of no split here
  std::vector<uint32_t> to_bucket(n, kNone);
  std::vector<uint64_t> to_offset(n);
  for (size_t k = 0; k < s.splits.size(); ++k) {
    size_t next = 0;
    for (size_t shard = 0; shard < s.series[k]->count(); ++shard) {
      const size_t b = s.base[k] + shard;
      uint64_t at = 0;
      for (uint64_t i = 0; i < s.buckets[b].documents; ++i) {
        const uint32_t d = s.splits[k].documents[next++];
        to_bucket[d] = uint32_t(b), to_offset[d] = at;
        at += store->document_size(d);
      }
    }
  }
  // This rank's run of the store, less what was recorded, from the end backwards.
  Intervals record = s.recorded();
  const uint64_t lo = n * uint64_t(ranks.rank()) / uint64_t(ranks.size()),
                 hi = n * uint64_t(ranks.rank() + 1) / uint64_t(ranks.size());
  const Intervals todo = remaining(lo, hi, record);
  uint64_t todo_docs = 0;
  for (const auto& [a, b] : todo) todo_docs += b - a;
  Progress progress("gpt spread", todo_docs);
  // A chunk is held twice (in the buckets before its store blocks go): about 1/32 of the store,
  // from 1 MiB (a record and a sync of every bucket per chunk) up to chunk_bytes.
  const uint64_t chunk_tokens = std::max<uint64_t>(
      1, std::min(s.o.chunk_bytes, std::max(store->num_tokens() * uint64_t(width) / 32, uint64_t{1} << 20)) / uint64_t(width));
  std::vector<char> buffer;
  struct Piece {
    uint32_t bucket;
    uint64_t offset;  // in the bucket, tokens
    uint64_t from, size;  // in the buffer, tokens
  };
  std::vector<Piece> pieces;
  bool can_free = true;
  for (auto it = todo.rbegin(); it != todo.rend(); ++it) {
    for (uint64_t end = it->second; end > it->first;) {
      uint64_t begin = end - 1;
      const uint64_t end_token = store->counts_before(end).tokens;
      while (begin > it->first && end_token - store->counts_before(begin - 1).tokens <= chunk_tokens) --begin;
      const uint64_t begin_token = store->counts_before(begin).tokens;
      buffer.resize(size_t((end_token - begin_token) * uint64_t(width)));
      store->read_token_bytes(begin_token, end_token, buffer.data());
      pieces.clear();
      for (uint64_t d = begin; d < end; ++d) {
        if (to_bucket[d] == kNone || s.kept(to_bucket[d])) continue;
        pieces.push_back({to_bucket[d], to_offset[d], store->counts_before(d).tokens - begin_token, store->document_size(d)});
      }
      std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
        return a.bucket != b.bucket ? a.bucket < b.bucket : a.offset < b.offset;
      });
      for (size_t i = 0; i < pieces.size();) {
        const uint32_t b = pieces[i].bucket;
        const std::string path = s.tokens_path(b);
        const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) throw_errno("cannot open", path);
        try {
          for (; i < pieces.size() && pieces[i].bucket == b; ++i)
            pwrite_all(fd, buffer.data() + pieces[i].from * uint64_t(width), size_t(pieces[i].size * uint64_t(width)),
                       pieces[i].offset * uint64_t(width), path);
          if (::fdatasync(fd) != 0) throw_errno("cannot sync", path);
        } catch (...) {
          ::close(fd);
          throw;
        }
        ::close(fd);
      }
      // On disk in the buckets: recorded, then (the whole recorded stretch around it) freed.
      record = merged([&] {
        Intervals r = record;
        r.emplace_back(begin, end);
        return r;
      }());
      nlohmann::json done = nlohmann::json::array();
      for (const auto& [a, b] : record) done.push_back({a, b});
      write_file_atomic(s.record_path(ranks.rank()), nlohmann::json{{"key", s.key}, {"done", done}}.dump() + "\n");
      if (s.o.free_store && can_free) {
        const auto around = std::find_if(record.begin(), record.end(), [&](const auto& iv) { return iv.first <= begin && end <= iv.second; });
        can_free = store->free_tokens(store->counts_before(around->first).tokens, store->counts_before(around->second).tokens);
        if (!can_free) log_warn(cat(s.dir(), ": the filesystem cannot give back part of a file (fallocate punch hole); "
                                             "the token store's space comes back once the spread is over"));
      }
      fault_point("gpt-spread-chunk");  // tests: killed with a chunk recorded and freed
      progress.add(end - begin);
      end = begin;
    }
  }
  progress.finish();
  ranks.barrier();  // every chunk of every rank is in the buckets
}

void GptSplitsWriter::write(MakeShardsStats& stats) {
  State& s = *s_;
  if (!s.load_plan()) throw Error(Where{s.plan_path()}, "internal: the GPT spread has no plan");
  const bool megatron = s.o.format == GptFormat::megatron;
  const MegatronDType dtype = megatron_optimal_dtype(s.o.vocab_size);
  const LlmcFormat llmc_format = s.o.vocab_size <= 65536 ? LlmcFormat::gpt2 : LlmcFormat::llama3;
  const int width = s.token_bytes;
  for (size_t k = 0; k < s.splits.size(); ++k) {
    const StageClock write_clock;
    const GptSplit& split = s.splits[k];
    ShardSeries& series = *s.series[k];
    Progress progress(split.output.valid ? "gpt shards (valid)" : "gpt shards", split.documents.size());
    for (size_t shard = 0; shard < series.count(); ++shard) {
      const size_t b = s.base[k] + shard;
      stats.instance_tokens += s.buckets[b].tokens;
      (split.output.valid ? stats.valid_instances : stats.instances) += s.buckets[b].documents;
      if (!series.kept(shard)) {
        if (!file_exists(s.tokens_path(b)) || file_size(s.tokens_path(b)) != s.buckets[b].tokens * uint64_t(width))
          throw Error(Where{s.tokens_path(b)}, cat("the bucket of shard ", series.name(shard), " is gone or not whole: ",
                                                   "run again without --resume (--keep-work keeps the buckets)"));
        const MappedFile sizes(s.sizes_path(b)), tokens(s.tokens_path(b));
        tokens.advise_sequential();
        const uint32_t* size = reinterpret_cast<const uint32_t*>(sizes.data());
        uint64_t at = 0;  // bytes
        auto document = [&](uint64_t i) {
          const uint64_t bytes = uint64_t(size[i]) * uint64_t(width);
          if (at + bytes > tokens.size()) throw Error(Where{tokens.path()}, "shorter than its sizes say");
          const uint8_t* p = tokens.data() + at;
          at += bytes;
          return std::pair{p, size_t(size[i])};
        };
        const std::string path = series.path(shard);
        if (megatron) {
          const std::string prefix = megatron_prefix(path);
          MegatronWriter w(prefix, dtype);
          for (uint64_t i = 0; i < s.buckets[b].documents; ++i) {
            const auto [p, count] = document(i);
            if (width == 2)
              w.add_sequence(std::span<const uint16_t>(reinterpret_cast<const uint16_t*>(p), count));
            else
              w.add_sequence(std::span<const int32_t>(reinterpret_cast<const int32_t*>(p), count));
            w.end_document();
          }
          w.finalize();
          series.committed(shard, s.buckets[b].documents, {{base_name(megatron_idx_path(prefix)), ""}});
        } else {
          LlmcWriter w(path, llmc_format);
          for (uint64_t i = 0; i < s.buckets[b].documents; ++i) {
            const auto [p, count] = document(i);
            if (width == 2)
              w.add(std::span<const uint16_t>(reinterpret_cast<const uint16_t*>(p), count));
            else
              w.add(std::span<const int32_t>(reinterpret_cast<const int32_t*>(p), count));
          }
          w.commit();
          series.committed(shard, w.tokens_written());
        }
        if (s.o.free_store) std::remove(s.tokens_path(b).c_str());
      }
      progress.add(s.buckets[b].documents);
    }
    progress.finish();
    stats.shards += series.count();
    write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
    series.finish(stats.to_json(0));
  }
  if (s.default_work && s.ranks->rank() == 0) std::filesystem::remove_all(s.dir());
}

void write_gpt_split(const GptShardsOptions& o, const TokenStore& store, const std::vector<uint32_t>& documents,
                     const SplitOutput& output, MakeShardsStats& stats) {
  GptSplitsWriter writer(o, {{documents, output}}, output.manifest.extra.value("key", nlohmann::json()));
  writer.spread(&store);
  writer.write(stats);
}

}  // namespace pretrain
