#include "datagen/shards/make_shards_stats.h"

#include <sys/resource.h>

#include <algorithm>

#include "common/communicator.h"
#include "common/json_integer.h"

namespace pretrain {

nlohmann::json MakeShardsStats::to_json(int seq_len) const {
  auto share = [](uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; };
  nlohmann::json j = {{"documents", documents},
                      {"sentences", sentences},
                      {"tokens", tokens},
                      {"train_documents", train_documents},
                      {"valid_documents", valid_documents},
                      {"instances", instances},
                      {"valid_instances", valid_instances},
                      {"instance_tokens", instance_tokens},
                      {"shards", shards},
                      {"seconds", seconds},
                      {"stage_seconds", {{"tokenize", tokenize_seconds}, {"instances", instances_seconds}, {"write", write_seconds}}},
                      {"stage_cpu_seconds",
                       {{"tokenize", tokenize_cpu_seconds}, {"instances", instances_cpu_seconds}, {"write", write_cpu_seconds}}}};
  if (predictions) {
    const uint64_t all = instances + valid_instances;
    j["predictions"] = predictions;
    j["masked_fraction"] = share(predictions, instance_tokens);
    j["mask_share"] = share(masked_as_mask, predictions);
    j["kept_share"] = share(masked_kept, predictions);
    j["random_share"] = share(masked_random, predictions);
    // Google's algorithm takes a random B always when the chunk is one sentence, and by a fair
    // coin otherwise: the coin's share is the 50% one; the overall share is higher on corpora of
    // short documents. Likewise the short target is drawn once per (document, pass).
    j["nsp_random_share"] = share(random_next, all);
    j["nsp_coin_random_share"] = share(random_next - forced_random_next, all - forced_random_next);
    j["short_target_share"] = share(short_document_passes, document_passes);
    j["short_target_instance_share"] = share(short_target_instances, all);
    // The rows a trainer computes: one per instance, or per pack with --pack.
    const uint64_t rows = packed_rows + valid_packed_rows > 0 ? packed_rows + valid_packed_rows : all;
    j["padding_share"] = 1.0 - share(instance_tokens, rows * uint64_t(seq_len));
    if (packed_rows + valid_packed_rows > 0) {
      j["packed_rows"] = packed_rows;
      j["valid_packed_rows"] = valid_packed_rows;
      j["instances_per_row"] = share(all, rows);
      j["tokens_per_real_token"] = share(rows * uint64_t(seq_len), instance_tokens);
    }
    j["length_histogram"] = {{"bin_width", std::max(1, seq_len / 16)}, {"counts", length_histogram}};
  }
  return j;
}

namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

}  // namespace

StageClock::StageClock() : wall_(std::chrono::steady_clock::now()), cpu_(process_cpu_seconds()) {}

double StageClock::wall_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
}

void StageClock::add_to(double& wall, double& cpu) const {
  wall += wall_seconds();
  cpu += process_cpu_seconds() - cpu_;
}

namespace {

// The record counts, field by field (their JSON names and where they are).
template <typename Stats, typename F>
void each_record_count(Stats& s, F&& f) {
  f("instance_tokens", s.instance_tokens);
  f("predictions", s.predictions);
  f("masked_as_mask", s.masked_as_mask);
  f("masked_kept", s.masked_kept);
  f("masked_random", s.masked_random);
  f("random_next", s.random_next);
  f("forced_random_next", s.forced_random_next);
  f("document_passes", s.document_passes);
  f("short_document_passes", s.short_document_passes);
  f("short_target_instances", s.short_target_instances);
}

}  // namespace

nlohmann::json record_counts_json(const MakeShardsStats& s) {
  nlohmann::json j;
  each_record_count(s, [&](const char* name, const uint64_t& v) { j[name] = v; });
  j["length_histogram"] = s.length_histogram;
  return j;
}

MakeShardsStats record_counts_from_json(const nlohmann::json& j) {
  MakeShardsStats s;
  each_record_count(s, [&](const char* name, uint64_t& v) { v = json_integer<uint64_t>(j.at(name)); });
  s.length_histogram = json_integers<uint64_t>(j.at("length_histogram"));
  return s;
}

void add_record_counts(MakeShardsStats& to, const MakeShardsStats& from) {
  std::vector<uint64_t*> mine;
  each_record_count(to, [&](const char*, uint64_t& v) { mine.push_back(&v); });
  size_t k = 0;
  each_record_count(from, [&](const char*, const uint64_t& v) { *mine[k++] += v; });
  if (to.length_histogram.size() < from.length_histogram.size()) to.length_histogram.resize(from.length_histogram.size(), 0);
  for (size_t i = 0; i < from.length_histogram.size(); ++i) to.length_histogram[i] += from.length_histogram[i];
}

void sum_record_counts(MakeShardsStats& s, const MakeShardsStats& before, const Communicator& ranks) {
  if (!ranks.distributed()) return;
  std::vector<uint64_t*> fields;
  std::vector<uint64_t> was;
  each_record_count(s, [&](const char*, uint64_t& v) { fields.push_back(&v); });
  each_record_count(before, [&](const char*, const uint64_t& v) { was.push_back(v); });
  // The histogram has one size wherever it was begun (by the length range): a rank that counted
  // nothing takes the others' size.
  std::vector<int64_t> sizes(static_cast<size_t>(ranks.size()));
  const int64_t mine = int64_t(s.length_histogram.size());
  ranks.all_gather(&mine, sizes.data(), sizeof mine);
  const size_t bins = size_t(*std::max_element(sizes.begin(), sizes.end()));
  s.length_histogram.resize(bins, 0);
  std::vector<int64_t> delta;
  for (size_t i = 0; i < fields.size(); ++i) delta.push_back(int64_t(*fields[i] - was[i]));
  for (size_t i = 0; i < bins; ++i)
    delta.push_back(int64_t(s.length_histogram[i] - (i < before.length_histogram.size() ? before.length_histogram[i] : 0)));
  ranks.all_reduce_sum(delta.data(), int64_t(delta.size()));
  for (size_t i = 0; i < fields.size(); ++i) *fields[i] = was[i] + uint64_t(delta[i]);
  for (size_t i = 0; i < bins; ++i)
    s.length_histogram[i] = (i < before.length_histogram.size() ? before.length_histogram[i] : 0) + uint64_t(delta[fields.size() + i]);
}

}  // namespace pretrain
