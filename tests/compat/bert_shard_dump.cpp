// Helper for tests/compat/test_bert_hdf5.py:
//   bert_shard_dump write PATH N SEQ_LEN MAX_PRED RECORDS_PER_CHUNK
//     writes N records of known content (the formula below; the Python test computes it too)
//   bert_shard_dump dump PATH [auto|hyperslab]
//     prints every record as JSON through our reader, for comparison with what h5py reads.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "formats/bert_hdf5.h"

using namespace pretrain;

// Record i of the deterministic shard. Keep in sync with expected_record() in test_bert_hdf5.py.
static BertRecord known_record(int64_t i, int64_t seq, int64_t max_pred) {
  BertRecord r;
  int64_t tokens = 2 + (i * 37) % (seq - 1);
  for (int64_t j = 0; j < tokens; ++j) {
    r.input_ids.push_back(static_cast<int32_t>((i * 131 + j * 7 + 1) % 30522));
    r.input_mask.push_back(1);
    r.segment_ids.push_back(j >= tokens / 2);
  }
  int64_t preds = std::min(max_pred, i % (max_pred + 1));
  for (int64_t k = 0; k < preds; ++k) {
    r.masked_lm_positions.push_back(static_cast<int32_t>(1 + (i + 3 * k) % (seq - 1)));
    r.masked_lm_ids.push_back(static_cast<int32_t>((i * 17 + k * 5) % 30522));
  }
  r.next_sentence_label = i % 3 == 0;
  return r;
}

static void write(const std::string& path, int64_t n, int64_t seq, int64_t max_pred, int64_t per_chunk) {
  BertShardWriter writer(path, seq, max_pred, {.records_per_chunk = per_chunk});
  int64_t i = 0;
  for (; i < n / 2; ++i) writer.append(known_record(i, seq, max_pred));  // one at a time
  while (i < n) {                                                       // then in batches of 10
    BertBatch batch(std::min<int64_t>(10, n - i), seq, max_pred);
    for (int64_t k = 0; k < batch.size; ++k) batch.set(k, known_record(i + k, seq, max_pred));
    writer.append(batch);
    i += batch.size;
  }
  writer.commit();
}

static void dump(const std::string& path, BertReadPath read_path) {
  BertShardReader reader(path, read_path);
  BertBatch b;
  reader.read_range(0, reader.size(), b);
  auto rows = [&](const auto& v, int64_t width) {
    nlohmann::json out = nlohmann::json::array();
    for (int64_t i = 0; i < b.size; ++i)
      out.push_back(std::vector<int32_t>(v.begin() + i * width, v.begin() + (i + 1) * width));
    return out;
  };
  nlohmann::json j = {{"size", reader.size()},
                      {"seq_len", reader.seq_len()},
                      {"max_predictions", reader.max_predictions()},
                      {"raw_chunk_path", reader.raw_chunk_path()},
                      {"input_ids", rows(b.input_ids, b.seq_len)},
                      {"input_mask", rows(b.input_mask, b.seq_len)},
                      {"segment_ids", rows(b.segment_ids, b.seq_len)},
                      {"masked_lm_positions", rows(b.masked_lm_positions, b.max_predictions)},
                      {"masked_lm_ids", rows(b.masked_lm_ids, b.max_predictions)},
                      {"next_sentence_labels", std::vector<int32_t>(b.next_sentence_labels.begin(), b.next_sentence_labels.end())}};
  std::cout << j.dump() << "\n";
}

int main(int argc, char** argv) {
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "write" && argc == 7) {
      write(argv[2], std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5]), std::stoll(argv[6]));
    } else if (cmd == "dump" && (argc == 3 || argc == 4)) {
      dump(argv[2], argc == 4 && std::string(argv[3]) == "hyperslab" ? BertReadPath::hyperslab : BertReadPath::automatic);
    } else {
      std::fprintf(stderr, "usage: bert_shard_dump write PATH N SEQ_LEN MAX_PRED RECORDS_PER_CHUNK\n"
                           "       bert_shard_dump dump PATH [auto|hyperslab]\n");
      return 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
