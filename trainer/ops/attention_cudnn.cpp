// cuDNN's fused scaled-dot-product attention through cudnn-frontend's graph API (the op:
// attention.h; the fallback and the choice between them: attention_cuda.cu). Built when CMake finds
// cudnn.h and cudnn-frontend (PRETRAIN_HAVE_CUDNN); libcudnn.so.9 itself is opened here at run time
// (cudnn-frontend's dynamic loading), so a machine without it runs the fallback.
//
// One forward and one backward graph per (B, T, heads, head size, mask, dropout, scale), built on
// the first call with that shape (heuristics mode A, then check_support and build_plans: any error
// there is returned as the reason to fall back) and kept. The tensors are the fused QKV layout
// read in place: Q, K and V [B, NH, T, HS] with strides (3TC, HS, 3C, 1) from qkv, qkv + C and
// qkv + 2C (llm.c's cudnn_att.cpp reads them so); O and dO [B, NH, T, HS] with strides (TC, HS, C,
// 1); the statistics (log Σ exp, natural log) fp32 [B, NH, T, 1] — the op's lse.
// Host code (C++ compiler, once): nvcc would run cudnn-frontend's templates through its front end
// once per GPU architecture, minutes of every build; the masks' kernels are attention_cudnn_cuda.cu.
#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>

#include "trainer/ops/attention.h"
#include "trainer/ops/attention_cudnn_internal.h"
#include "common/cuda_check.h"

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // cudnn-frontend's dynamic loading reads the library from here
}

namespace pretrain::ops::cudnn {
namespace fe = cudnn_frontend;
namespace {

cudaStream_t stream_of(const Device& d) { return static_cast<cudaStream_t>(d.stream); }

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSeqQ, kSeqKV, kBias, kSeed, kOffset };

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, float, float>;
Key key_of(const AttentionShape& s) { return {s.B, s.T, s.NH, s.HS, int(s.mask), s.dropout, s.scale}; }

struct Graphs {
  std::shared_ptr<fe::graph::Graph> forward, backward;
  int64_t workspace = 0;
};

// Opens libcudnn: PRETRAIN_CUDNN_LIBRARY if set, else the loader's search path, else CUDA's folder.
bool open_library(std::string& why) {
  if (fe::cudnn_dlhandle) return true;
  std::vector<std::string> names;
  if (const char* env = std::getenv("PRETRAIN_CUDNN_LIBRARY")) names.push_back(env);
  names.insert(names.end(), {"libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9"});
  for (const std::string& name : names)
    if ((fe::cudnn_dlhandle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL))) return true;
  why = cat("libcudnn.so.9 not found (", dlerror(), "; set PRETRAIN_CUDNN_LIBRARY or LD_LIBRARY_PATH)");
  return false;
}

template <typename A>
void set_masks(fe::graph::Graph& g, A& opts, const AttentionShape& s) {
  if (s.mask == AttentionMask::causal) {
    opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  } else if (s.mask == AttentionMask::padding) {
    auto len = [&](const char* name, int64_t uid) {
      return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({s.B, 1, 1, 1})
                          .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
    };
    opts.set_padding_mask(true).set_seq_len_q(len("seq_q", kSeqQ)).set_seq_len_kv(len("seq_kv", kSeqKV));
  } else if (s.mask == AttentionMask::packed) {
    opts.set_bias(g.tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias).set_dim({s.B, 1, s.T, s.T})
                               .set_stride({s.T * s.T, s.T * s.T, s.T, 1})));
  }
  if (s.dropout > 0) {
    auto scalar = [&](const char* name, int64_t uid) {
      return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({1, 1, 1, 1})
                          .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT64));
    };
    opts.set_dropout(s.dropout, scalar("seed", kSeed), scalar("offset", kOffset));
  }
}

std::shared_ptr<fe::graph::Tensor_attributes> qkv_tensor(fe::graph::Graph& g, const AttentionShape& s, const char* name,
                                                         int64_t uid) {
  const int64_t C = s.NH * s.HS;
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({s.B, s.NH, s.T, s.HS})
                      .set_stride({3 * C * s.T, s.HS, 3 * C, 1}));
}
std::vector<int64_t> out_stride(const AttentionShape& s) { return {s.T * s.NH * s.HS, s.HS, s.NH * s.HS, 1}; }

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

std::shared_ptr<fe::graph::Graph> forward_graph(const AttentionShape& s) {
  auto g = new_graph();
  auto Q = qkv_tensor(*g, s, "Q", kQ), K = qkv_tensor(*g, s, "K", kK), V = qkv_tensor(*g, s, "V", kV);
  auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(s.scale);
  set_masks(*g, opts, s);
  auto [O, stats] = g->sdpa(Q, K, V, opts);
  O->set_output(true).set_uid(kO).set_dim({s.B, s.NH, s.T, s.HS}).set_stride(out_stride(s));
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({s.B, s.NH, s.T, 1})
      .set_stride({s.NH * s.T, s.T, 1, 1});
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const AttentionShape& s, bool deterministic) {
  auto g = new_graph();
  auto Q = qkv_tensor(*g, s, "Q", kQ), K = qkv_tensor(*g, s, "K", kK), V = qkv_tensor(*g, s, "V", kV);
  auto o = [&](const char* name, int64_t uid) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({s.B, s.NH, s.T, s.HS})
                         .set_stride(out_stride(s)));
  };
  auto stats = g->tensor(fe::graph::Tensor_attributes().set_name("stats").set_uid(kStats).set_dim({s.B, s.NH, s.T, 1})
                             .set_stride({s.NH * s.T, s.T, 1, 1}).set_data_type(fe::DataType_t::FLOAT));
  auto opts = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(s.scale)
                  .set_deterministic_algorithm(deterministic);
  set_masks(*g, opts, s);
  auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, o("O", kO), o("dO", kDO), stats, opts);
  const int64_t C = s.NH * s.HS;
  for (auto& [t, uid] : {std::pair{dQ, kDQ}, std::pair{dK, kDK}, std::pair{dV, kDV}})
    t->set_output(true).set_uid(uid).set_dim({s.B, s.NH, s.T, s.HS}).set_stride({3 * C * s.T, s.HS, 3 * C, 1});
  return g;
}

// validate → operation graph → plans (heuristics A) → support → build; the first error's words.
bool build(fe::graph::Graph& g, cudnnHandle_t handle, std::string& why) {
  auto ok = [&](fe::error_t e) {
    if (!e.is_good()) why = e.get_message();
    return e.is_good();
  };
  return ok(g.validate()) && ok(g.build_operation_graph(handle)) && ok(g.create_execution_plans({fe::HeurMode_t::A})) &&
         ok(g.check_support(handle)) && ok(g.build_plans(handle));
}

}  // namespace

struct Sdpa {
  const Device& d;
  bool deterministic;
  cudnnHandle_t handle = nullptr;
  std::map<Key, Graphs> graphs;
  char* workspace = nullptr;
  int64_t workspace_bytes = 0;
  int32_t* lengths = nullptr;  // [B], padding masks
  int64_t lengths_n = 0;
  bf16* bias = nullptr;  // [B, T, T], packed rows
  int64_t bias_n = 0;
  int64_t* rng = nullptr;  // seed, offset

  Sdpa(const Device& dev, bool det) : d(dev), deterministic(det) {}
  ~Sdpa() {
    if (handle) fe::detail::destroy_handle(handle);
    for (void* p : {static_cast<void*>(workspace), static_cast<void*>(lengths), static_cast<void*>(bias), static_cast<void*>(rng)})
      if (p) cudaFree(p);
  }
  template <typename X>
  X* grow(X*& p, int64_t& have, int64_t want) {
    if (want <= have) return p;
    cuda_check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize");
    if (p) cudaFree(p);
    cuda_check(cudaMalloc(&p, size_t(want) * sizeof(X)), "cudaMalloc (cuDNN attention)");
    have = want;
    return p;
  }
  // The inputs a mask needs, written on the device; the variant pack's entries for them.
  void mask_inputs(const AttentionShape& s, const int32_t* key_mask, uint64_t seed, uint64_t offset,
                   std::unordered_map<int64_t, void*>& pack) {
    void* stream = d.stream;
    if (s.mask == AttentionMask::padding) {
      grow(lengths, lengths_n, s.B);
      write_sequence_lengths(lengths, key_mask, s.B, s.T, stream);
      pack[kSeqQ] = pack[kSeqKV] = lengths;
    } else if (s.mask == AttentionMask::packed) {
      grow(bias, bias_n, s.B * s.T * s.T);
      write_packed_bias(bias, key_mask, s.B, s.T, stream);
      pack[kBias] = bias;
    }
    if (s.dropout > 0) {
      int64_t have = rng ? 2 : 0;
      grow(rng, have, 2);
      write_rng_state(rng, seed, offset, stream);
      pack[kSeed] = rng, pack[kOffset] = rng + 1;
    }
  }
};

Sdpa* sdpa_create(const Device& d, bool deterministic, std::string& why) {
  if (!open_library(why)) return nullptr;
  const int64_t version = int64_t(fe::detail::get_backend_version());
  if (version < 90000) {
    why = cat("cuDNN ", version, " is older than 9.0");
    return nullptr;
  }
  auto s = std::make_unique<Sdpa>(d, deterministic);
  if (fe::detail::create_handle(&s->handle) != CUDNN_STATUS_SUCCESS ||
      fe::detail::set_stream(s->handle, stream_of(d)) != CUDNN_STATUS_SUCCESS) {
    s->handle = nullptr;
    why = "cudnnCreate failed";
    return nullptr;
  }
  return s.release();
}

void sdpa_destroy(Sdpa* s) { delete s; }

bool sdpa_prepare(Sdpa& sdpa, const AttentionShape& s, std::string& why) {
  const Key key = key_of(s);
  if (sdpa.graphs.count(key)) return true;
  if (s.mask == AttentionMask::packed && sdpa.deterministic) {
    why = "cuDNN's backward with a bias tensor (packed rows) is not deterministic";
    return false;
  }
  try {
    Graphs g;
    g.forward = forward_graph(s);
    if (!build(*g.forward, sdpa.handle, why)) return false;
    g.backward = backward_graph(s, sdpa.deterministic && s.mask != AttentionMask::packed);
    if (!build(*g.backward, sdpa.handle, why)) return false;
    int64_t fw = 0, bw = 0;
    if (!g.forward->get_workspace_size(fw).is_good() || !g.backward->get_workspace_size(bw).is_good()) {
      why = "no workspace size";
      return false;
    }
    g.workspace = std::max(fw, bw);
    sdpa.graphs.emplace(key, std::move(g));
    return true;
  } catch (const std::exception& e) {  // cudnn-frontend throws on a missing symbol or library
    why = e.what();
    return false;
  }
}

namespace {
void run(Sdpa& sdpa, fe::graph::Graph& g, int64_t workspace, std::unordered_map<int64_t, void*>& pack) {
  void* ws = sdpa.grow(sdpa.workspace, sdpa.workspace_bytes, std::max<int64_t>(workspace, 1));
  fe::error_t e = g.execute(sdpa.handle, pack, ws);
  if (!e.is_good()) throw Error(cat("cuDNN attention: ", e.get_message()));
}
}  // namespace

void sdpa_forward(Sdpa& sdpa, const AttentionForward<bf16>& a) {
  Graphs& g = sdpa.graphs.at(key_of(a.s));
  const int64_t C = a.s.NH * a.s.HS;
  auto* qkv = const_cast<bf16*>(a.qkv);
  std::unordered_map<int64_t, void*> pack = {{kQ, qkv}, {kK, qkv + C}, {kV, qkv + 2 * C}, {kO, a.out}, {kStats, a.lse}};
  sdpa.mask_inputs(a.s, a.key_mask, a.seed, a.offset, pack);
  run(sdpa, *g.forward, g.workspace, pack);
}

void sdpa_backward(Sdpa& sdpa, const AttentionBackward<bf16>& a) {
  Graphs& g = sdpa.graphs.at(key_of(a.s));
  const int64_t C = a.s.NH * a.s.HS;
  auto* qkv = const_cast<bf16*>(a.qkv);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, qkv}, {kK, qkv + C}, {kV, qkv + 2 * C}, {kO, const_cast<bf16*>(a.out)}, {kDO, const_cast<bf16*>(a.dout)},
      {kStats, const_cast<float*>(a.lse)}, {kDQ, a.dqkv}, {kDK, a.dqkv + C}, {kDV, a.dqkv + 2 * C}};
  sdpa.mask_inputs(a.s, a.key_mask, a.seed, a.offset, pack);
  run(sdpa, *g.backward, g.workspace, pack);
}

}  // namespace pretrain::ops::cudnn
