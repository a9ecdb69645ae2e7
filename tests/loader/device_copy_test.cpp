// The device copy (loader/device_copy.{h,cpp}, and its CUDA backend device_copy_cuda.cu, or
// device_copy_nocuda.cpp without CUDA): the batch tensors' layout in a device slot, the CPU
// backend's widen step on hand-made host slots (the element functions of loader/widen.h, which the
// CUDA kernel runs too), and asking for a GPU that is not there. The CUDA backend's copies are
// checked on a GPU by tests/gpu/loader_gpu_test.cpp.
#include "loader/device_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::device_copy_test {
namespace {

// The widen step alone, on a hand-made slot: the CPU backend runs the kernel body the GPU runs.
TEST(Widen, BertLabelsStopAtTheFirstZeroPositionAsNvidiaCountsThem) {
  const SlotLayout slot = SlotLayout::make(ModelKind::bert, 2, 4, 3, 100, true);
  std::vector<uint8_t> host(slot.bytes);
  HostRows rows(slot, host.data());
  const int32_t ids[4] = {1, 50, 60, 2};
  const int8_t seg[4] = {0, 0, 1, 1}, mask[4] = {1, 1, 1, 0};
  const int32_t pos_a[3] = {2, 0, 3}, lab_a[3] = {61, 0, 99};  // the 3 after a 0 is ignored
  const int32_t pos_b[3] = {1, 2, 3}, lab_b[3] = {51, 62, 3};
  rows.put_bert(0, ids, seg, mask, pos_a, lab_a, 3, 1);
  rows.put_bert(1, ids, seg, mask, pos_b, lab_b, 3, 0);
  const OutputLayout out = OutputLayout::make(slot, 4, false);
  std::vector<uint8_t> dev(out.bytes);
  auto backend = make_cpu_backend();
  CopyJob job{&slot, &out, 2, 0, 0, host.data(), dev.data()};
  backend->copy(job);
  const int32_t* labels = reinterpret_cast<const int32_t*>(dev.data() + out.mlm_labels);
  EXPECT_EQ(std::vector<int32_t>(labels, labels + 8), (std::vector<int32_t>{-1, -1, 61, -1, -1, 51, 62, 3}));
  const int32_t* nsp = reinterpret_cast<const int32_t*>(dev.data() + out.next_sentence_labels);
  EXPECT_EQ(nsp[0], 1);
  EXPECT_EQ(nsp[1], 0);
  const int32_t bad[4] = {1, 100, 2, 3};
  EXPECT_THROW(rows.put_bert(0, bad, seg, mask, pos_a, lab_a, 3, 0), Error) << "id 100 in a vocabulary of 100";
  const int32_t bad_pos[3] = {4, 0, 0};
  EXPECT_THROW(rows.put_bert(0, ids, seg, mask, bad_pos, lab_a, 3, 0), Error);
}

TEST(Widen, GptTargetsAreTokensShiftedByOne) {
  const SlotLayout slot = SlotLayout::make(ModelKind::gpt, 2, 3, 0, 70000, true);
  EXPECT_EQ(slot.token_dtype, TensorDType::i32) << "70000 ids do not fit uint16";
  std::vector<uint8_t> host(slot.bytes);
  HostRows rows(slot, host.data());
  const uint32_t a[4] = {1, 2, 3, 69999}, b[4] = {10, 20, 30, 40};
  rows.put_tokens(0, 0, a, 4);
  rows.put_tokens(1, 0, b, 2);
  rows.put_tokens(1, 2, b + 2, 2);
  EXPECT_THROW(rows.put_tokens(1, 2, b, 3), Error) << "past the row";
  const uint32_t big[1] = {70000};
  EXPECT_THROW(rows.put_tokens(0, 0, big, 1), Error);
  const OutputLayout out = OutputLayout::make(slot, 8, false);
  std::vector<uint8_t> dev(out.bytes);
  CopyJob job{&slot, &out, 2, 0, 0, host.data(), dev.data()};
  make_cpu_backend()->copy(job);
  const int64_t* tokens = reinterpret_cast<const int64_t*>(dev.data() + out.tokens);
  const int64_t* targets = reinterpret_cast<const int64_t*>(dev.data() + out.targets);
  EXPECT_EQ(std::vector<int64_t>(tokens, tokens + 6), (std::vector<int64_t>{1, 2, 3, 10, 20, 30}));
  EXPECT_EQ(std::vector<int64_t>(targets, targets + 6), (std::vector<int64_t>{2, 3, 69999, 20, 30, 40}));
}

TEST(Widen, PackedRowsCarryPositionsSequencesAndEachInstancesLabel) {
  const SlotLayout slot = SlotLayout::make(ModelKind::bert, 2, 8, 2, 100, true, 2);
  EXPECT_EQ(slot.nsp_slots(), 2);
  std::vector<uint8_t> host(slot.bytes);
  HostRows rows(slot, host.data());
  const int32_t ids[8] = {1, 50, 2, 1, 60, 2, 0, 0};
  const int8_t seg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, mask[8] = {1, 1, 1, 1, 1, 1, 0, 0};
  const int32_t pos[2] = {1, 4}, lab[2] = {51, 61};
  const int32_t positions[8] = {0, 1, 2, 0, 1, 2, 0, 0};
  const int8_t sequences[8] = {1, 1, 1, 2, 2, 2, 0, 0};
  const int32_t cls_a[2] = {0, 3}, cls_b[2] = {0, 0};
  const int8_t nsp_a[2] = {1, 0}, nsp_b[2] = {0, -1};
  rows.put_bert(0, ids, seg, mask, pos, lab, 2, 1);
  rows.put_packing(0, positions, sequences, cls_a, nsp_a);
  rows.put_bert(1, ids, seg, mask, pos, lab, 2, 0);
  rows.put_packing(1, positions, sequences, cls_b, nsp_b);
  const OutputLayout out = OutputLayout::make(slot, 4, false);
  std::vector<uint8_t> dev(out.bytes);
  CopyJob job{&slot, &out, 2, 0, 0, host.data(), dev.data()};
  make_cpu_backend()->copy(job);
  auto ints = [&](size_t offset, size_t n) {
    const int32_t* p = reinterpret_cast<const int32_t*>(dev.data() + offset);
    return std::vector<int32_t>(p, p + n);
  };
  EXPECT_EQ(ints(out.next_sentence_labels, 4), (std::vector<int32_t>{1, 0, 0, -1}));
  EXPECT_EQ(ints(out.next_sentence_positions, 4), (std::vector<int32_t>{0, 3, 0, 0}));
  EXPECT_EQ(ints(out.position_ids, 8), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 0}));
  EXPECT_EQ(ints(out.sequence_ids + 8 * 4, 8), (std::vector<int32_t>{1, 1, 1, 2, 2, 2, 0, 0}));
  EXPECT_EQ(ints(out.mlm_labels, 8), (std::vector<int32_t>{-1, 51, -1, -1, 61, -1, -1, -1}));
  // Values that do not fit a packed row.
  const int8_t too_many[8] = {1, 1, 1, 3, 3, 3, 0, 0}, on_padding[8] = {1, 1, 1, 2, 2, 2, 1, 0};
  EXPECT_THROW(rows.put_packing(0, positions, too_many, cls_a, nsp_a), Error) << "sequence id 3 of max_pack 2";
  EXPECT_THROW(rows.put_packing(0, positions, on_padding, cls_a, nsp_a), Error) << "a sequence id where input_mask is 0";
  const int8_t bad_label[2] = {1, 2};
  EXPECT_THROW(rows.put_packing(0, positions, sequences, cls_a, bad_label), Error);
  const int32_t far[2] = {0, 8};
  EXPECT_THROW(rows.put_packing(0, positions, sequences, far, nsp_a), Error);
  const SlotLayout plain = SlotLayout::make(ModelKind::bert, 2, 8, 2, 100, true);
  std::vector<uint8_t> plain_host(plain.bytes);
  EXPECT_THROW(HostRows(plain, plain_host.data()).put_packing(0, positions, sequences, cls_a, nsp_a), Error);
}

// BERT int64 ids from a slot of int32 tokens (a vocabulary past uint16): ids, segments, mask and
// predictions arrive exactly, in the id type asked for.
TEST(Widen, WideTokensToInt64) {
  const SlotLayout slot = SlotLayout::make(ModelKind::bert, 1, 4, 2, 70000, true);
  ASSERT_EQ(slot.token_dtype, TensorDType::i32);
  std::vector<uint8_t> host(slot.bytes);
  const int32_t ids[4] = {1, 69999, 65536, 2}, pos[2] = {1, 2}, lab[2] = {68000, 65535};
  const int8_t seg[4] = {0, 0, 1, 1}, mask[4] = {1, 1, 1, 1};
  HostRows(slot, host.data()).put_bert(0, ids, seg, mask, pos, lab, 2, 1);
  const OutputLayout out = OutputLayout::make(slot, 8, false);
  std::vector<uint8_t> dev(out.bytes);
  make_cpu_backend()->copy(CopyJob{&slot, &out, 1, 0, 0, host.data(), dev.data()});
  auto longs = [&](size_t offset, size_t n) {
    const int64_t* p = reinterpret_cast<const int64_t*>(dev.data() + offset);
    return std::vector<int64_t>(p, p + n);
  };
  EXPECT_EQ(longs(out.input_ids, 4), (std::vector<int64_t>{1, 69999, 65536, 2}));
  EXPECT_EQ(longs(out.segment_ids, 4), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(longs(out.input_mask, 4), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(longs(out.masked_lm_positions, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(longs(out.masked_lm_ids, 2), (std::vector<int64_t>{68000, 65535}));
  EXPECT_EQ(longs(out.mlm_labels, 4), (std::vector<int64_t>{-1, 68000, 65535, -1}));
  EXPECT_EQ(longs(out.next_sentence_labels, 1), std::vector<int64_t>{1});
}

// Every tensor of a device slot starts 64-byte aligned, after the one before it and with room for
// its elements; the staging copy of the host slot (CUDA) comes last.
TEST(OutputLayout, TensorsAreAlignedApartAndWhole) {
  struct Case {
    ModelKind kind;
    int64_t max_pack;
    size_t id_size;
    bool staging;
  };
  const int64_t batch = 3, seq = 5, preds = 2;
  for (const Case& c : {Case{ModelKind::bert, 0, 4, false}, Case{ModelKind::bert, 0, 8, true}, Case{ModelKind::bert, 3, 4, true},
                        Case{ModelKind::gpt, 0, 8, false}, Case{ModelKind::gpt, 0, 4, true}}) {
    const SlotLayout slot = SlotLayout::make(c.kind, batch, seq, preds, 30000, true, c.max_pack);
    const OutputLayout out = OutputLayout::make(slot, c.id_size, c.staging);
    EXPECT_EQ(out.id_size, c.id_size);
    const size_t tokens = size_t(batch * seq) * c.id_size, predictions = size_t(batch * preds) * c.id_size,
                 nsp = size_t(batch * slot.nsp_slots()) * c.id_size;
    // (offset, bytes) in the order the tensors are laid out
    std::vector<std::pair<size_t, size_t>> tensors;
    if (c.kind == ModelKind::bert) {
      tensors = {{out.input_ids, tokens},  {out.segment_ids, tokens},        {out.input_mask, tokens},
                 {out.mlm_labels, tokens}, {out.masked_lm_positions, predictions}, {out.masked_lm_ids, predictions},
                 {out.next_sentence_labels, nsp}};
      if (c.max_pack > 0)
        tensors.insert(tensors.end(), {{out.position_ids, tokens}, {out.sequence_ids, tokens}, {out.next_sentence_positions, nsp}});
    } else {
      tensors = {{out.tokens, tokens}, {out.targets, tokens}};
    }
    if (c.staging) tensors.push_back({out.staging, slot.bytes});
    else EXPECT_EQ(out.staging, 0u);
    EXPECT_EQ(tensors.front().first, 0u);
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(tensors[i].first % 64, 0u) << "tensor " << i;
      const size_t end = tensors[i].first + tensors[i].second;
      EXPECT_LE(end, i + 1 < tensors.size() ? tensors[i + 1].first : out.bytes) << "tensor " << i;
    }
    EXPECT_EQ(out.bytes % 64, 0u);
  }
}

TEST(DeviceCopy, TheCpuBackendHoldsBatchesInHostMemory) {
  auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->device(), -1);
  EXPECT_FALSE(cpu->needs_staging());
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{5000}}) {
    uint8_t* host = cpu->alloc_host(bytes);
    uint8_t* device = cpu->alloc_device(bytes);
    ASSERT_NE(host, nullptr);
    ASSERT_NE(device, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 4096, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 4096, 0u);
    host[bytes - 1] = 7, device[bytes - 1] = 9;  // writable to the last byte
    cpu->free_host(host);
    cpu->free_device(device);
  }
  // Nothing to wait for: each returns at once.
  cpu->wait_host_free(0);
  cpu->wait_ready(0, nullptr);
  cpu->consumed(0, nullptr);
}

// A GPU that is not here (this build without CUDA, or no such device) is an Error naming it.
TEST(DeviceCopy, AskingForAGpuThatIsNotThereNamesIt) {
  try {
    make_cuda_backend(99, 2, 2, true);
    GTEST_SKIP() << "a 100th GPU is here";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:99"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::device_copy_test
