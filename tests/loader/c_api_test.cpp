// The C API, called the way a C trainer calls it (only loader/c_api.h): batches equal the records
// of a small shard written with BertShardWriter, epochs end and the run finishes, state strings
// resume exactly, dynamic masking, and every error comes back as a code and a message.
#include "loader/c_api.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "formats/bert_hdf5.h"
#include "test_util.h"

namespace c_api_test {
namespace {

using pretrain::BertRecord;
using pretrain::testing::TempDir;

constexpr int64_t kSeqLen = 16, kMaxPred = 4, kRecords = 10;

// Record i: [CLS]=1 a b [SEP]=2 c d e [SEP]=2, then padding; ids ≥ 10 so 1..9 stay special.
BertRecord make_record(int64_t i) {
  BertRecord r;
  int32_t base = int32_t(10 + 7 * i);
  r.input_ids = {1, base, base + 1, 2, base + 2, base + 3, base + 4, 2};
  r.segment_ids = {0, 0, 0, 0, 1, 1, 1, 1};
  r.input_mask = std::vector<int32_t>(r.input_ids.size(), 1);
  // 1 or 2 predictions (the rest 0-padded, as NVIDIA pads).
  r.masked_lm_positions = {1};
  r.masked_lm_ids = {base};
  if (i % 2 == 0) {
    r.masked_lm_positions.push_back(5);
    r.masked_lm_ids.push_back(base + 3);
  }
  r.next_sentence_label = int32_t(i % 2);
  return r;
}

std::string write_shard(const TempDir& dir, int64_t records = kRecords) {
  std::string path = dir.file("train-00000.hdf5");
  pretrain::BertShardWriter writer(path, kSeqLen, kMaxPred);
  for (int64_t i = 0; i < records; ++i) writer.append(make_record(i));
  writer.commit();
  return path;
}

// Element [row, col] of a host tensor of any dtype, widened.
int64_t at(const pretrain_tensor_t* t, int64_t row, int64_t col = 0) {
  int64_t i = t->ndim == 1 ? row : row * t->shape[1] + col;
  switch (t->dtype) {
    case PRETRAIN_DTYPE_UINT8: return static_cast<const uint8_t*>(t->data)[i];
    case PRETRAIN_DTYPE_INT8: return static_cast<const int8_t*>(t->data)[i];
    case PRETRAIN_DTYPE_UINT16: return static_cast<const uint16_t*>(t->data)[i];
    case PRETRAIN_DTYPE_INT32: return static_cast<const int32_t*>(t->data)[i];
    case PRETRAIN_DTYPE_INT64: return static_cast<const int64_t*>(t->data)[i];
  }
  ADD_FAILURE() << "dtype " << t->dtype;
  return 0;
}

const pretrain_tensor_t* tensor(const pretrain_batch_t& b, const char* name) {
  const pretrain_tensor_t* t = pretrain_batch_tensor(&b, name);
  EXPECT_NE(t, nullptr) << name;
  return t;
}

// Every value of a batch, by tensor, for comparing batches of two loaders.
std::vector<std::vector<int64_t>> contents(const pretrain_batch_t& b) {
  std::vector<std::vector<int64_t>> out;
  for (int32_t k = 0; k < b.num_tensors; ++k) {
    const pretrain_tensor_t* t = &b.tensors[k];
    std::vector<int64_t> values;
    int64_t cols = t->ndim == 2 ? t->shape[1] : 1;
    for (int64_t r = 0; r < t->shape[0]; ++r)
      for (int64_t c = 0; c < cols; ++c) values.push_back(at(t, r, c));
    out.push_back(values);
  }
  return out;
}

std::string config(const std::string& shard, const std::string& extra = "", bool shuffle = false) {
  return "{\"sources\": [\"" + shard + "\"], \"batch_size\": 4, \"drop_last\": false, \"workers\": 2, " +
         "\"prefetch\": 3, \"shuffle\": " + (shuffle ? "true" : "false") + (extra.empty() ? "" : ", " + extra) + "}";
}

struct Handle {
  pretrain_loader_t* loader = nullptr;
  explicit Handle(const std::string& json) {
    int rc = pretrain_loader_create(json.c_str(), &loader);
    EXPECT_EQ(rc, PRETRAIN_OK) << pretrain_loader_last_error();
  }
  ~Handle() { pretrain_loader_destroy(loader); }
};

TEST(CApi, BatchesAreTheShardsRecordsInOrderAndEpochsEnd) {
  TempDir dir;
  std::string shard = write_shard(dir);
  Handle h(config(shard, "\"epochs\": 2, \"id_dtype\": \"int64\""));
  ASSERT_NE(h.loader, nullptr);

  pretrain_loader_info_t info;
  ASSERT_EQ(pretrain_loader_info(h.loader, &info), PRETRAIN_OK);
  EXPECT_EQ(info.kind, PRETRAIN_KIND_BERT);
  EXPECT_EQ(info.seq_len, kSeqLen);
  EXPECT_EQ(info.max_predictions, kMaxPred);
  EXPECT_EQ(info.samples_per_epoch, uint64_t(kRecords));
  EXPECT_EQ(info.batches_per_epoch, 3u);

  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t record = 0;
    pretrain_batch_t b;
    for (uint64_t index = 0; index < 3; ++index) {
      ASSERT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_OK) << pretrain_loader_last_error();
      EXPECT_EQ(b.kind, PRETRAIN_KIND_BERT);
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.index, index);
      EXPECT_EQ(b.size, index < 2 ? 4 : 2);
      const pretrain_tensor_t* ids = tensor(b, "input_ids");
      ASSERT_NE(ids, nullptr);
      EXPECT_EQ(ids->dtype, PRETRAIN_DTYPE_INT64);
      EXPECT_EQ(ids->ndim, 2);
      EXPECT_EQ(ids->shape[0], b.size);
      EXPECT_EQ(ids->shape[1], kSeqLen);
      EXPECT_EQ(ids->device, -1);
      EXPECT_EQ(ids->bytes, size_t(b.size * kSeqLen * 8));
      const pretrain_tensor_t* nsp = tensor(b, "next_sentence_labels");
      EXPECT_EQ(nsp->ndim, 1);
      for (int64_t row = 0; row < b.size; ++row, ++record) {
        BertRecord r = make_record(record);
        r.input_ids.resize(kSeqLen), r.segment_ids.resize(kSeqLen), r.input_mask.resize(kSeqLen);
        r.masked_lm_positions.resize(kMaxPred), r.masked_lm_ids.resize(kMaxPred);
        for (int64_t c = 0; c < kSeqLen; ++c) {
          EXPECT_EQ(at(ids, row, c), r.input_ids[c]) << "record " << record << " column " << c;
          EXPECT_EQ(at(tensor(b, "segment_ids"), row, c), r.segment_ids[c]);
          EXPECT_EQ(at(tensor(b, "input_mask"), row, c), r.input_mask[c]);
          int64_t label = -1;
          for (int64_t p = 0; p < kMaxPred; ++p)
            if (r.masked_lm_positions[p] == c && c > 0) label = r.masked_lm_ids[p];
          EXPECT_EQ(at(tensor(b, "mlm_labels"), row, c), label) << "record " << record << " column " << c;
        }
        for (int64_t p = 0; p < kMaxPred; ++p) {
          EXPECT_EQ(at(tensor(b, "masked_lm_positions"), row, p), r.masked_lm_positions[p]);
          EXPECT_EQ(at(tensor(b, "masked_lm_ids"), row, p), r.masked_lm_ids[p]);
        }
        EXPECT_EQ(at(nsp, row), r.next_sentence_label);
      }
      EXPECT_EQ(pretrain_batch_tensor(&b, "tokens"), nullptr);
      pretrain_batch_release(&b);
      EXPECT_EQ(b.internal, nullptr);
      pretrain_batch_release(&b);  // twice: harmless
    }
    EXPECT_EQ(record, kRecords);
    EXPECT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_END_OF_EPOCH);
    EXPECT_EQ(b.internal, nullptr);
    EXPECT_EQ(b.num_tensors, 0);
  }
  pretrain_batch_t b;
  EXPECT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_FINISHED);
  EXPECT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_FINISHED);

  pretrain_loader_stats_t stats;
  ASSERT_EQ(pretrain_loader_stats(h.loader, &stats), PRETRAIN_OK);
  EXPECT_EQ(stats.batches, 6u);
  EXPECT_EQ(stats.samples, uint64_t(2 * kRecords));
  EXPECT_GE(stats.seconds, 0.0);
}

TEST(CApi, StateStringResumesExactly) {
  TempDir dir;
  std::string shard = write_shard(dir, 40);
  std::string json = config(shard, "\"seed\": 7, \"shuffle_window\": 8", /*shuffle=*/true);
  std::vector<std::vector<std::vector<int64_t>>> expected;
  std::string state;
  {
    Handle h(json);
    pretrain_batch_t b;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_OK) << pretrain_loader_last_error();
      pretrain_batch_release(&b);
    }
    char* s = nullptr;
    ASSERT_EQ(pretrain_loader_state(h.loader, &s), PRETRAIN_OK);
    state = s;
    pretrain_string_free(s);
    for (int i = 0; i < 5; ++i) {  // across the epoch's end (10 batches of 4)
      int rc = pretrain_loader_next(h.loader, &b);
      ASSERT_EQ(rc, PRETRAIN_OK) << pretrain_loader_last_error();
      expected.push_back(contents(b));
      pretrain_batch_release(&b);
    }
  }
  Handle again(json);
  ASSERT_EQ(pretrain_loader_restore(again.loader, state.c_str()), PRETRAIN_OK) << pretrain_loader_last_error();
  char* s = nullptr;
  ASSERT_EQ(pretrain_loader_state(again.loader, &s), PRETRAIN_OK);
  EXPECT_EQ(std::string(s), state);
  pretrain_string_free(s);
  for (const auto& want : expected) {
    pretrain_batch_t b;
    ASSERT_EQ(pretrain_loader_next(again.loader, &b), PRETRAIN_OK) << pretrain_loader_last_error();
    EXPECT_EQ(contents(b), want);
    pretrain_batch_release(&b);
  }
}

TEST(CApi, DynamicMaskingIsDeterministicAndKeepsLabels) {
  TempDir dir;
  std::string shard = write_shard(dir, 40);
  // No manifest beside the shard: the ids come from the config.
  std::string json = config(shard,
                            "\"dynamic_masking\": true, \"mask_probability\": 0.3, \"max_predictions\": 4, "
                            "\"mask_id\": 3, \"vocab_size\": 400, \"special_ids\": [0, 1, 2, 3]");
  std::vector<std::vector<std::vector<int64_t>>> first;
  for (int run = 0; run < 2; ++run) {
    Handle h(json);
    ASSERT_NE(h.loader, nullptr);
    pretrain_batch_t b;
    int64_t record = 0, masked = 0;
    for (int i = 0; pretrain_loader_next(h.loader, &b) == PRETRAIN_OK; ++i) {
      const pretrain_tensor_t* ids = tensor(b, "input_ids");
      const pretrain_tensor_t* labels = tensor(b, "mlm_labels");
      for (int64_t row = 0; row < b.size; ++row, ++record) {
        BertRecord r = make_record(record);
        r.input_ids.resize(kSeqLen);
        int64_t picked = 0;
        for (int64_t c = 0; c < kSeqLen; ++c) {
          int64_t label = at(labels, row, c), id = at(ids, row, c);
          if (label < 0) {
            EXPECT_EQ(id, r.input_ids[c]) << "record " << record << ": an unpicked token changed";
            continue;
          }
          ++picked;
          EXPECT_EQ(label, r.input_ids[c]) << "record " << record << ": the label is the original token";
          EXPECT_GE(r.input_ids[c], 10) << "record " << record << ": a special token was picked";
          EXPECT_TRUE(id == 3 || (id >= 0 && id < 400)) << id;
          masked += id == 3;
        }
        EXPECT_LE(picked, kMaxPred);
      }
      if (run == 0) first.push_back(contents(b));
      else EXPECT_EQ(contents(b), first[size_t(i)]) << "batch " << i << " differs between two runs";
      pretrain_batch_release(&b);
    }
    EXPECT_EQ(record, 40);
    EXPECT_GT(masked, 0);
  }
}

TEST(CApi, BatchOutlivesDestroyedLoader) {
  TempDir dir;
  std::string shard = write_shard(dir);
  pretrain_loader_t* loader = nullptr;
  ASSERT_EQ(pretrain_loader_create(config(shard).c_str(), &loader), PRETRAIN_OK) << pretrain_loader_last_error();
  pretrain_batch_t b;
  ASSERT_EQ(pretrain_loader_next(loader, &b), PRETRAIN_OK) << pretrain_loader_last_error();
  pretrain_loader_destroy(loader);
  EXPECT_EQ(at(tensor(b, "input_ids"), 3, 1), make_record(3).input_ids[1]);
  pretrain_batch_release(&b);
}

TEST(CApi, HoldingEveryRingSlotIsAnErrorNotAHang) {
  TempDir dir;
  std::string shard = write_shard(dir, 40);
  Handle h(config(shard));  // prefetch 3
  pretrain_batch_t held[3];
  for (auto& b : held) ASSERT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_OK) << pretrain_loader_last_error();
  pretrain_batch_t more;
  EXPECT_LT(pretrain_loader_next(h.loader, &more), 0);
  EXPECT_STRNE(pretrain_loader_last_error(), "");
  for (auto& b : held) pretrain_batch_release(&b);
  EXPECT_EQ(pretrain_loader_next(h.loader, &more), PRETRAIN_OK) << pretrain_loader_last_error();
  pretrain_batch_release(&more);
}

TEST(CApi, ConfigAndSpecialIds) {
  TempDir dir;
  std::string shard = write_shard(dir);
  Handle h(config(shard, "\"seed\": 99, \"dynamic_masking\": true, \"mask_id\": 3, \"vocab_size\": 400, "
                        "\"special_ids\": [0, 1, 2, 3]"));
  char* s = nullptr;
  ASSERT_EQ(pretrain_loader_config(h.loader, &s), PRETRAIN_OK);
  std::string json = s;
  pretrain_string_free(s);
  EXPECT_NE(json.find("\"seed\":99"), std::string::npos) << json;
  EXPECT_NE(json.find("\"dynamic_masking\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"mask_id\":3"), std::string::npos) << json;
  ASSERT_EQ(pretrain_loader_special_ids(h.loader, &s), PRETRAIN_OK);
  EXPECT_STREQ(s, "{}");  // no manifest, no tokenizer
  pretrain_string_free(s);
  EXPECT_EQ(pretrain_loader_special_id(h.loader, "[MASK]"), -1);
}

TEST(CApi, ErrorsComeBackAsCodesAndMessages) {
  TempDir dir;
  pretrain_loader_t* loader = reinterpret_cast<pretrain_loader_t*>(1);
  std::string missing = dir.file("no-such-shard.hdf5");
  EXPECT_LT(pretrain_loader_create(config(missing).c_str(), &loader), 0);
  EXPECT_EQ(loader, nullptr);
  EXPECT_NE(std::string(pretrain_loader_last_error()).find("no-such-shard.hdf5"), std::string::npos)
      << pretrain_loader_last_error();

  EXPECT_EQ(pretrain_loader_create("{not json", &loader), PRETRAIN_USAGE_ERROR);
  EXPECT_NE(std::string(pretrain_loader_last_error()).find("JSON"), std::string::npos) << pretrain_loader_last_error();
  EXPECT_EQ(pretrain_loader_create("{\"sources\": [\"x\"], \"batch_sise\": 4}", &loader), PRETRAIN_USAGE_ERROR);
  EXPECT_NE(std::string(pretrain_loader_last_error()).find("batch_sise"), std::string::npos) << pretrain_loader_last_error();
  EXPECT_EQ(pretrain_loader_create("{\"sources\": [\"x\"], \"batch_size\": \"4\"}", &loader), PRETRAIN_USAGE_ERROR);
  EXPECT_NE(std::string(pretrain_loader_last_error()).find("batch_size"), std::string::npos) << pretrain_loader_last_error();
  EXPECT_EQ(pretrain_loader_create("{\"sources\": [\"x\"], \"kind\": \"t5\"}", &loader), PRETRAIN_USAGE_ERROR);
  EXPECT_EQ(pretrain_loader_create(nullptr, &loader), PRETRAIN_USAGE_ERROR);
  EXPECT_EQ(pretrain_loader_create("{}", nullptr), PRETRAIN_USAGE_ERROR);

  // A corrupt shard: data error naming the file.
  std::string corrupt = dir.file("corrupt.hdf5");
  {
    FILE* f = std::fopen(corrupt.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not an HDF5 file", f);
    std::fclose(f);
  }
  // Whether the shard is opened by create() or by the workers, the error names it.
  if (pretrain_loader_create(config(corrupt).c_str(), &loader) == PRETRAIN_OK) {
    pretrain_batch_t b;
    EXPECT_EQ(pretrain_loader_next(loader, &b), PRETRAIN_ERROR);
    pretrain_loader_destroy(loader);
  }
  EXPECT_NE(std::string(pretrain_loader_last_error()).find("corrupt.hdf5"), std::string::npos)
      << pretrain_loader_last_error();

  std::string shard = write_shard(dir);
  Handle h(config(shard));
  EXPECT_EQ(pretrain_loader_restore(h.loader, "not a state"), PRETRAIN_USAGE_ERROR);
  EXPECT_STRNE(pretrain_loader_last_error(), "");
  EXPECT_EQ(pretrain_loader_restore(h.loader, nullptr), PRETRAIN_USAGE_ERROR);
  // A state of another run (another seed) is refused.
  Handle other(config(shard, "\"seed\": 4321"));
  char* s = nullptr;
  ASSERT_EQ(pretrain_loader_state(other.loader, &s), PRETRAIN_OK);
  EXPECT_LT(pretrain_loader_restore(h.loader, s), 0);
  pretrain_string_free(s);

  pretrain_batch_t b;
  EXPECT_EQ(pretrain_loader_next(nullptr, &b), PRETRAIN_USAGE_ERROR);
  EXPECT_EQ(pretrain_loader_next(h.loader, nullptr), PRETRAIN_USAGE_ERROR);
  EXPECT_EQ(pretrain_loader_state(h.loader, nullptr), PRETRAIN_USAGE_ERROR);
  EXPECT_EQ(pretrain_loader_special_id(nullptr, "[CLS]"), -1);
  pretrain_batch_release(nullptr);
  pretrain_loader_destroy(nullptr);
  // The loader still works after the refused calls.
  ASSERT_EQ(pretrain_loader_next(h.loader, &b), PRETRAIN_OK) << pretrain_loader_last_error();
  pretrain_batch_release(&b);
}

}  // namespace
}  // namespace c_api_test
