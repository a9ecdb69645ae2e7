// The loader on a GPU (CTest label "gpu"; skips without one): batches copied back from the device
// equal the CPU loader's, on the default stream and on a consumer stream of the caller's, with
// uint16 transport, int32 and int64 ids, and across slot reuse (more batches than the ring holds).
#include <gtest/gtest.h>

#include <vector>

#include "common/device.h"
#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5.h"
#include "formats/megatron.h"
#include "loader/loader.h"
#include "test_util.h"

#if PRETRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace pretrain {
namespace {

#if PRETRAIN_HAVE_CUDA
std::vector<uint8_t> to_host(const Tensor& t, cudaStream_t stream) {
  std::vector<uint8_t> out(t.bytes());
  EXPECT_EQ(cudaMemcpyAsync(out.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return out;
}

void compare(LoaderConfig config, cudaStream_t stream) {
  Loader cpu(config);
  config.device = "cuda:0";
  config.consumer_stream = stream;
  Loader gpu(config);
  int batches = 0;
  for (int e = 0; e < 2; ++e)
    while (true) {
      auto a = cpu.next(), b = gpu.next();
      ASSERT_EQ(a.has_value(), b.has_value());
      if (!a) break;
      ++batches;
      auto ta = a->tensors(), tb = b->tensors();
      ASSERT_EQ(ta.size(), tb.size());
      for (size_t i = 0; i < ta.size(); ++i) {
        EXPECT_EQ(tb[i].second.device, 0);
        const auto* host = static_cast<const uint8_t*>(ta[i].second.data);
        EXPECT_EQ(to_host(tb[i].second, stream), std::vector<uint8_t>(host, host + ta[i].second.bytes()))
            << ta[i].first << " of batch " << a->index << " epoch " << e;
      }
    }
  EXPECT_GT(batches, 2 * config.prefetch) << "slots were reused";
}
#endif

TEST(GpuLoader, DeviceBatchesEqualTheCpuLoaders) {
  DeviceReport r = query_devices();
  if (!r.built_with_cuda) GTEST_SKIP() << "built without CUDA";
  if (r.gpus.empty()) GTEST_SKIP() << "no GPU here: " << r.reason;
#if PRETRAIN_HAVE_CUDA
  testing::TempDir dir;
  {
    BertShardWriter w(dir.file("a.hdf5"), 32, 5);
    for (int g = 0; g < 300; ++g) {
      BertRecord rec;
      for (int j = 0; j < 20 + g % 12; ++j) {
        rec.input_ids.push_back(j == 0 ? 101 : 1000 + (g * 31 + j) % 20000);
        rec.input_mask.push_back(1);
        rec.segment_ids.push_back(j > 10);
      }
      rec.masked_lm_positions = {3, 7};
      rec.masked_lm_ids = {rec.input_ids[3], rec.input_ids[7]};
      rec.next_sentence_label = g % 2;
      w.append(rec);
    }
    w.commit();
    MegatronWriter m(dir.file("g"), MegatronDType::u16);
    for (int d = 0; d < 50; ++d) {
      std::vector<int32_t> doc(size_t(50 + d * 7));
      for (size_t i = 0; i < doc.size(); ++i) doc[i] = int32_t((d * 131 + i) % 50000);
      m.add_sequence(doc);
      m.end_document();
    }
    m.finalize();
  }
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (TensorDType ids : {TensorDType::i32, TensorDType::i64})
    for (cudaStream_t s : {cudaStream_t(nullptr), stream}) {
      compare(LoaderConfig{.sources = {dir.file("a.hdf5")}, .batch_size = 16, .prefetch = 3, .id_dtype = ids}, s);
      compare(LoaderConfig{.sources = {dir.file("g")}, .kind = ModelKind::gpt, .batch_size = 4, .seq_len = 64,
                           .prefetch = 2, .id_dtype = ids},
              s);
    }
  cudaStreamDestroy(stream);
#endif
}

}  // namespace
}  // namespace pretrain
