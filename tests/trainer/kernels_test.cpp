// Each op of trainer/kernels.h, run by the CPU backend, against trainer/reference.h's
// double-precision definition, on random inputs with awkward sizes (not multiples of the row
// chunk of the column reductions). The GEMMs and the sums of squares the backend builds from
// them are backend_test.cpp's, the embedding's backward pass layers_test.cpp's.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "expect_close.h"
#include "fixtures.h"
#include "trainer/backend.h"
#include "trainer/reference.h"

namespace pretrain::kernels_test {
namespace {

using namespace kernels;
using reference::Vec;
using testing::expect_close;
using testing::random_floats;

Vec row(const std::vector<float>& v, int64_t r, int64_t C) { return Vec(v.begin() + r * C, v.begin() + (r + 1) * C); }

const Device kCpu{};

TEST(Kernels, LayerNormForwardAndBackward) {
  const int64_t N = 2 * kRowChunk + 7, C = 45;  // three chunks of rows, the last short
  auto x = random_floats(N * C, 1, 2.0f), w = random_floats(C, 2), b = random_floats(C, 3), dout = random_floats(N * C, 4);
  std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.5f), dw(C, 0), db(C, 0);
  std::vector<float> partial(size_t(2 * row_chunks(N) * C));
  launch(kCpu, N, LayerNormForward{out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), C, 1e-5f});
  launch(kCpu, row_chunks(N) * C, LayerNormParamPartials{partial.data(), dout.data(), x.data(), mean.data(), rstd.data(), N, C});
  launch(kCpu, C, AddColumnPartials{dw.data(), partial.data(), row_chunks(N), C});
  launch(kCpu, C, AddColumnPartials{db.data(), partial.data() + row_chunks(N) * C, row_chunks(N), C});
  launch(kCpu, N, LayerNormBackward{dx.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), C, true});
  Vec wd(w.begin(), w.end()), bd(b.begin(), b.end()), sum_dw(C, 0), sum_db(C, 0);
  for (int64_t r = 0; r < N; ++r) {
    const Vec want = reference::layernorm(row(x, r, C), wd, bd, 1e-5);
    Vec rdx, rdw, rdb;
    reference::layernorm_backward(row(x, r, C), wd, 1e-5, row(dout, r, C), rdx, rdw, rdb);
    for (int64_t c = 0; c < C; ++c) {
      expect_close(want[size_t(c)], out[size_t(r * C + c)], 1e-5, "layernorm out");
      expect_close(0.5 + rdx[size_t(c)], dx[size_t(r * C + c)], 1e-4, "layernorm dx (accumulated onto 0.5)");
      sum_dw[size_t(c)] += rdw[size_t(c)], sum_db[size_t(c)] += rdb[size_t(c)];
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    expect_close(sum_dw[size_t(c)], dw[size_t(c)], 1e-5, "layernorm dw");
    expect_close(sum_db[size_t(c)], db[size_t(c)], 1e-5, "layernorm db");
  }
}

TEST(Kernels, GeluBothKindsAndTheirDerivatives) {
  auto x = random_floats(1001, 5, 3.0f);
  std::vector<float> y(x.size()), dx(x.size()), ones(x.size(), 1.0f);
  for (Gelu kind : {Gelu::erf, Gelu::tanh}) {
    launch(kCpu, int64_t(x.size()), GeluForward{y.data(), x.data(), kind});
    launch(kCpu, int64_t(x.size()), GeluBackward{dx.data(), ones.data(), x.data(), kind});
    for (size_t i = 0; i < x.size(); ++i) {
      auto f = [&](double v) { return kind == Gelu::erf ? reference::gelu_erf(v) : reference::gelu_tanh(v); };
      expect_close(f(x[i]), y[i], 1e-6, "gelu");
      const double h = 1e-4, slope = (f(x[i] + h) - f(x[i] - h)) / (2 * h);
      expect_close(slope, dx[i], 1e-5, "gelu'");
    }
  }
}

TEST(Kernels, SoftmaxCausalAndPaddingMasks) {
  const int64_t B = 2, NH = 3, T = 9;
  auto s = random_floats(B * NH * T * T, 6, 3.0f), dp = random_floats(B * NH * T * T, 7);
  std::vector<int32_t> mask(B * T, 1);
  for (int64_t j = 6; j < T; ++j) mask[size_t(1 * T + j)] = 0;  // sample 1: the last 3 keys are padding
  for (bool causal : {false, true}) {
    std::vector<float> p(s.size()), ds(s.size());
    launch(kCpu, B * NH * T, SoftmaxForward{p.data(), s.data(), causal ? nullptr : mask.data(), causal, NH, T});
    launch(kCpu, B * NH * T, SoftmaxBackward{ds.data(), dp.data(), p.data(), T});
    for (int64_t r = 0; r < B * NH * T; ++r) {
      const int64_t b = r / (NH * T), i = r % T;
      Vec add(T, 0.0);
      if (!causal) {
        for (int64_t j = 0; j < T; ++j) add[size_t(j)] = mask[size_t(b * T + j)] ? 0.0 : -10000.0;
      }
      const Vec want = reference::softmax(row(s, r, T), causal ? size_t(i + 1) : size_t(T), add);
      double dot = 0;
      for (int64_t j = 0; j < T; ++j) dot += want[size_t(j)] * dp[size_t(r * T + j)];
      for (int64_t j = 0; j < T; ++j) {
        expect_close(want[size_t(j)], p[size_t(r * T + j)], 1e-5, "softmax");
        expect_close(want[size_t(j)] * (dp[size_t(r * T + j)] - dot), ds[size_t(r * T + j)], 1e-4, "softmax'");
      }
      if (causal) {
        for (int64_t j = i + 1; j < T; ++j) EXPECT_EQ(p[size_t(r * T + j)], 0.0f) << "a causal row sees no later key";
      }
    }
  }
}

// A packed row's sequence_ids as the key mask: a query of instance k sees the keys of instance k
// only (block-diagonal attention), a padding query (0) every real token, no query a padding key.
TEST(Kernels, SoftmaxWithSequenceIdsAttendsWithinEachInstance) {
  const int64_t B = 2, NH = 2, T = 9;
  auto s = random_floats(B * NH * T * T, 12, 3.0f);
  const std::vector<int32_t> ids = {1, 1, 1, 2, 2, 2, 2, 0, 0,   // two instances, two padding tokens
                                    1, 1, 2, 2, 3, 3, 3, 3, 0};  // three instances
  std::vector<float> p(s.size());
  launch(kCpu, B * NH * T, SoftmaxForward{p.data(), s.data(), ids.data(), false, NH, T});
  for (int64_t r = 0; r < B * NH * T; ++r) {
    const int64_t b = r / (NH * T), i = r % T;
    const int32_t query = ids[size_t(b * T + i)];
    Vec add(T, 0.0);
    for (int64_t j = 0; j < T; ++j) {
      const int32_t key = ids[size_t(b * T + j)];
      const bool visible = key != 0 && (query == 0 || key == query);
      add[size_t(j)] = visible ? 0.0 : -10000.0;
      if (!visible) {
        EXPECT_EQ(p[size_t(r * T + j)], 0.0f) << "row " << r << " sees key " << j;
      }
    }
    const Vec want = reference::softmax(row(s, r, T), size_t(T), add);
    for (int64_t j = 0; j < T; ++j) expect_close(want[size_t(j)], p[size_t(r * T + j)], 1e-5, "packed softmax");
  }
}

TEST(Kernels, CrossEntropyIgnoresNegativeTargets) {
  const int64_t N = 5, V = 37;
  auto logits = random_floats(N * V, 8, 4.0f);
  const std::vector<float> original = logits;
  std::vector<int32_t> targets = {3, -1, 36, 0, 17};
  std::vector<float> losses(N);
  launch(kCpu, N, CrossEntropy{logits.data(), losses.data(), targets.data(), V, 0.25f});
  for (int64_t r = 0; r < N; ++r) {
    if (targets[size_t(r)] < 0) {
      EXPECT_EQ(losses[size_t(r)], 0.0f);
      for (int64_t v = 0; v < V; ++v) EXPECT_EQ(logits[size_t(r * V + v)], 0.0f);
      continue;
    }
    Vec grad;
    const double want = reference::cross_entropy(row(original, r, V), targets[size_t(r)], 0.25, grad);
    expect_close(want, losses[size_t(r)], 1e-5, "loss");
    for (int64_t v = 0; v < V; ++v) expect_close(grad[size_t(v)], logits[size_t(r * V + v)], 1e-5, "dlogits");
  }
}

// NSP slots read their instance's [CLS] row: b·T + next_sentence_positions, or b·T without them.
TEST(Kernels, NspRowsAreEachInstancesClsRow) {
  const int64_t B = 2, K = 3, T = 16;
  const std::vector<int32_t> positions = {0, 5, 11, 0, 9, 0};  // row 1 holds two instances
  std::vector<int32_t> rows(B * K);
  launch(kCpu, B * K, NspRows{rows.data(), positions.data(), K, T});
  EXPECT_EQ(rows, (std::vector<int32_t>{0, 5, 11, 16, 25, 16}));
  std::vector<int32_t> unpacked(B);
  launch(kCpu, B, NspRows{unpacked.data(), nullptr, 1, T});
  EXPECT_EQ(unpacked, (std::vector<int32_t>{0, 16}));
}

TEST(Kernels, AdamWMatchesTheDefinition) {
  auto p = random_floats(3001, 10), g = random_floats(3001, 11);
  std::vector<float> m(p.size(), 0), v(p.size(), 0);
  Vec pd(p.begin(), p.end()), md(p.size(), 0), vd(p.size(), 0);
  for (int t = 1; t <= 3; ++t) {
    const float bc1 = float(1 - std::pow(0.9, t)), bc2 = float(1 - std::pow(0.999, t));
    launch(kCpu, int64_t(p.size()), AdamW{p.data(), m.data(), v.data(), g.data(), 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, bc1, bc2});
    for (size_t i = 0; i < p.size(); ++i) reference::adamw(pd[i], g[i], md[i], vd[i], 1e-2, 0.9, 0.999, 1e-8, 0.1, t);
  }
  for (size_t i = 0; i < p.size(); ++i) expect_close(pd[i], p[i], 1e-5, "adamw");
}

TEST(Kernels, DropoutKeepsAboutOneMinusPAndScales) {
  const int64_t n = 200000;
  std::vector<float> x(static_cast<size_t>(n), 1.0f), y(x.size()), again(x.size());
  launch(kCpu, n, Dropout{y.data(), x.data(), 42, 0.1f});
  launch(kCpu, n, Dropout{again.data(), x.data(), 42, 0.1f});
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(y[size_t(i)] == 0.0f || std::fabs(y[size_t(i)] - 1.0f / 0.9f) < 1e-6f);
    kept += y[size_t(i)] != 0.0f;
  }
  EXPECT_NEAR(double(kept) / double(n), 0.9, 0.005);
  EXPECT_EQ(y, again) << "the mask is a function of the key";
  launch(kCpu, n, Dropout{again.data(), x.data(), 43, 0.1f});
  EXPECT_NE(y, again) << "another key, another mask";
}

TEST(Kernels, MaskedPositionsCountAsRunPretrainingDoes) {
  // Row 0: predictions at 3, 5 then padding; row 1: a zero in the middle stops the count.
  const std::vector<int32_t> positions = {3, 5, 0, 0, 2, 0, 7, 0}, ids = {11, 12, 0, 0, 13, 0, 14, 0};
  std::vector<int32_t> rows(8), targets(8);
  launch(kCpu, 8, MaskedPositions{rows.data(), targets.data(), positions.data(), ids.data(), 4, 10});
  EXPECT_EQ(targets, (std::vector<int32_t>{11, 12, -1, -1, 13, -1, -1, -1}));
  EXPECT_EQ(rows[0], 3);
  EXPECT_EQ(rows[1], 5);
  EXPECT_EQ(rows[4], 12);
}

TEST(Kernels, RoundingToBf16AndFp16IsNearestEven) {
  // fp16: against the compiler's own conversion (_Float16, round to nearest even); bf16: against the
  // bit-pattern rounding of reference.h. Random values over the whole range, and the edge cases.
  std::mt19937 gen(12);
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e-8f, 5.96e-8f, 3e-8f,
                           6.1035e-5f, 1.0009765625f, 1.00048828125f, 1.00146484375f, 3.0e38f, INFINITY, -INFINITY};
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = uint32_t(gen());
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isfinite(x)) xs.push_back(x);
  }
  for (float x : xs) {
#ifdef __FLT16_MAX__  // the compiler has _Float16 (GCC 12, clang 15 on x86; not clang 14)
    EXPECT_EQ(round_to_fp16(x), float(static_cast<_Float16>(x))) << x;
#endif
    EXPECT_EQ(round_to_bf16(x), reference::round_to_bf16(x)) << x;
  }
  EXPECT_TRUE(std::isnan(round_to_bf16(NAN)) && std::isnan(round_to_fp16(NAN)));
}

}  // namespace
}  // namespace pretrain::kernels_test
