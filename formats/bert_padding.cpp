#include "formats/bert_padding.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/error.h"

namespace pretrain {

namespace {

void check_lengths(std::span<const uint64_t> counts, int64_t seq_len) {
  if (seq_len < 1) throw UsageError(cat("seq_len ", seq_len, ": expected at least 1"));
  for (size_t n = size_t(seq_len) + 1; n < counts.size(); ++n)
    if (counts[n]) throw UsageError(cat(counts[n], " instance(s) of ", n, " tokens, longer than seq_len ", seq_len));
}

}  // namespace

uint64_t unbinned_tokens(std::span<const uint64_t> counts, int64_t seq_len) {
  check_lengths(counts, seq_len);
  uint64_t instances = 0;
  for (uint64_t c : counts) instances += c;
  return instances * uint64_t(seq_len);
}

uint64_t binned_tokens(std::span<const uint64_t> counts, int64_t seq_len, int64_t bin_size) {
  check_lengths(counts, seq_len);
  if (bin_size < 1 || bin_size > seq_len)
    throw UsageError(cat("bin size ", bin_size, ": expected 1 to seq_len (", seq_len, ")"));
  uint64_t tokens = 0;
  // n = 0 computes nothing: padding.py's (0 − 1) // B + 1 is 0.
  for (size_t n = 1; n < counts.size(); ++n) {
    const int64_t edge = std::min((int64_t(n) - 1) / bin_size * bin_size + bin_size, seq_len);
    tokens += counts[n] * uint64_t(edge);
  }
  return tokens;
}

uint64_t packed_rows(std::span<const uint64_t> counts, int64_t seq_len, int64_t max_pack) {
  check_lengths(counts, seq_len);
  if (max_pack < 1) throw UsageError(cat("max_pack ", max_pack, ": expected at least 1"));
  int64_t shortest = 0;
  while (size_t(shortest) < counts.size() && counts[size_t(shortest)] == 0) ++shortest;
  struct Run {
    int64_t room, held;  // of each row in the run
    uint64_t rows;
  };
  std::vector<Run> runs, next;
  // Appends rows to `out` unless they are closed, merged into the last run when they are alike.
  auto keep = [&](std::vector<Run>& out, Run r) {
    if (r.rows == 0 || r.held == max_pack || r.room == 0 || r.room < shortest) return;
    if (!out.empty() && out.back().room == r.room && out.back().held == r.held) out.back().rows += r.rows;
    else out.push_back(r);
  };
  // Instances of n tokens a row with `room` and `held` takes before it cannot take another.
  auto capacity = [&](int64_t room, int64_t held, int64_t n) {
    return uint64_t(std::min(n ? room / n : max_pack, max_pack - held));
  };
  uint64_t rows = 0;
  for (int64_t n = std::min<int64_t>(seq_len, int64_t(counts.size()) - 1); n >= 0; --n) {
    uint64_t left = counts[size_t(n)];
    if (left == 0) continue;
    next.clear();
    for (const Run& r : runs) {
      if (left == 0 || r.room < n) {
        keep(next, r);
        continue;
      }
      const uint64_t k = capacity(r.room, r.held, n);  // ≥ 1: the run is open and has room
      const uint64_t full = std::min(r.rows, left / k);
      left -= full * k;
      keep(next, {r.room - int64_t(k) * n, r.held + int64_t(k), full});
      uint64_t untouched = r.rows - full;
      if (untouched > 0 && left > 0) {  // one row takes the rest (fewer than k)
        keep(next, {r.room - int64_t(left) * n, r.held + int64_t(left), 1});
        left = 0;
        --untouched;
      }
      keep(next, {r.room, r.held, untouched});
    }
    if (left > 0) {  // new rows, each filled before the next is opened
      const uint64_t k = capacity(seq_len, 0, n);
      const uint64_t full = left / k, part = left % k;
      rows += full + (part ? 1 : 0);
      keep(next, {seq_len - int64_t(k) * n, int64_t(k), full});
      if (part) keep(next, {seq_len - int64_t(part) * n, int64_t(part), 1});
    }
    std::swap(runs, next);
  }
  return rows;
}

}  // namespace pretrain
