#include "common/model_kind.h"

#include "common/error.h"

namespace pretrain {

const char* model_kind_name(ModelKind kind) { return kind == ModelKind::bert ? "bert" : "gpt"; }

ModelKind parse_model_kind(const std::string& name, const std::string& what) {
  if (name == "bert") return ModelKind::bert;
  if (name == "gpt") return ModelKind::gpt;
  throw UsageError(cat(what, ": expected \"bert\" or \"gpt\", found \"", name, "\""));
}

}  // namespace pretrain
