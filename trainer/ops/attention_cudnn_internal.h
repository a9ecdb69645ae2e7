// The cuDNN side of ops/attention.h (attention_cudnn.cu), as the fallback's file calls it; built
// only with PRETRAIN_HAVE_CUDNN. Every function that can fail for a reason cuDNN gives returns
// false (or null) with the reason, so the caller warns once and falls back.
#pragma once
#include <string>

#include "trainer/ops/attention.h"

namespace pretrain::ops::cudnn {

struct Sdpa;  // the handle, the graphs built so far, the workspace and the masks' inputs

Sdpa* sdpa_create(const Device& d, bool deterministic, std::string& why);  // null: cuDNN unusable here
void sdpa_destroy(Sdpa* sdpa);
// Builds (once per shape) the forward and backward graphs; false: cuDNN cannot take this shape.
bool sdpa_prepare(Sdpa& sdpa, const AttentionShape& s, std::string& why);
void sdpa_forward(Sdpa& sdpa, const AttentionForward<bf16>& a);
void sdpa_backward(Sdpa& sdpa, const AttentionBackward<bf16>& a);

}  // namespace pretrain::ops::cudnn
