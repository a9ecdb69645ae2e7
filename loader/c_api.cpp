// The C API over pretrain::Loader. Every entry point runs its body inside guard(), which turns
// exceptions into return codes and the thread's last-error message; nothing else may throw here.
#include "loader/c_api.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "loader/config_json.h"
#include "loader/loader.h"

// The handle: the Loader is shared with every batch handed out, so a batch released after
// pretrain_loader_destroy() still has its ring to go back to.
struct pretrain_loader {
  std::shared_ptr<pretrain::Loader> loader;
  bool last_was_end = false;  // two ends in a row with `epochs` set: the run is finished
};

namespace {

thread_local std::string last_error;

// What pretrain_batch_t::internal points to: the Batch (the slot's lease), the names its tensor
// views point into, and the loader it came from.
struct BatchHolder {
  std::shared_ptr<pretrain::Loader> owner;  // destroyed after `batch` (declared first)
  pretrain::Batch batch;
  std::vector<std::string> names;
};

template <typename Body>
int guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const pretrain::UsageError& e) {
    last_error = e.what();
    return PRETRAIN_USAGE_ERROR;
  } catch (const pretrain::Error& e) {
    last_error = e.what();
    return PRETRAIN_ERROR;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return PRETRAIN_INTERNAL_ERROR;
  } catch (const std::exception& e) {
    last_error = e.what();
    return PRETRAIN_INTERNAL_ERROR;
  } catch (...) {
    last_error = "unknown exception";
    return PRETRAIN_INTERNAL_ERROR;
  }
}

void need(const void* p, const char* what) {
  if (!p) throw pretrain::UsageError(pretrain::cat(what, " is NULL"));
}

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void clear(pretrain_batch_t* batch) { std::memset(batch, 0, sizeof(*batch)); }

}  // namespace

extern "C" {

const char* pretrain_loader_last_error(void) { return last_error.c_str(); }

int pretrain_loader_create(const char* config_json, pretrain_loader_t** out) {
  if (out) *out = nullptr;
  return guard([&] {
    need(out, "out");
    need(config_json, "config_json");
    auto handle = std::make_unique<pretrain_loader>();
    handle->loader = std::make_shared<pretrain::Loader>(pretrain::loader_config_from_json(std::string(config_json)));
    *out = handle.release();
    return PRETRAIN_OK;
  });
}

void pretrain_loader_destroy(pretrain_loader_t* loader) {
  // ~Loader stops the pipeline; it must not throw, but a C caller must never see it if it did.
  guard([&] {
    delete loader;
    return PRETRAIN_OK;
  });
}

int pretrain_loader_next(pretrain_loader_t* loader, pretrain_batch_t* batch) {
  if (batch) clear(batch);
  return guard([&] {
    need(loader, "loader");
    need(batch, "batch");
    std::optional<pretrain::Batch> next = loader->loader->next();
    if (!next) {
      // Loader::next() answers nullopt at every epoch's end and, after `epochs` epochs, forever:
      // an end right after an end (the next epoch had nothing) means the run is over.
      bool finished = loader->last_was_end && loader->loader->config().epochs > 0;
      loader->last_was_end = true;
      return finished ? PRETRAIN_FINISHED : PRETRAIN_END_OF_EPOCH;
    }
    loader->last_was_end = false;
    auto holder = std::make_unique<BatchHolder>();
    holder->owner = loader->loader;
    holder->batch = std::move(*next);
    auto tensors = holder->batch.tensors();
    if (tensors.size() > PRETRAIN_MAX_TENSORS)
      throw pretrain::Error(pretrain::cat("a batch has ", tensors.size(), " tensors, the C API holds ",
                                          PRETRAIN_MAX_TENSORS));
    holder->names.reserve(tensors.size());
    for (const auto& [name, tensor] : tensors) holder->names.push_back(name);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const pretrain::Tensor& t = tensors[i].second;
      pretrain_tensor_t& c = batch->tensors[i];
      c.name = holder->names[i].c_str();
      c.data = t.data;
      c.dtype = int32_t(t.dtype);
      c.ndim = t.ndim;
      c.shape[0] = t.ndim >= 1 ? t.shape[0] : 0;
      c.shape[1] = t.ndim >= 2 ? t.shape[1] : 0;
      c.device = t.device;
      c.bytes = t.bytes();
    }
    batch->num_tensors = int32_t(tensors.size());
    batch->size = holder->batch.size;
    batch->epoch = holder->batch.epoch;
    batch->index = holder->batch.index;
    batch->kind = holder->batch.kind == pretrain::ModelKind::bert ? PRETRAIN_KIND_BERT : PRETRAIN_KIND_GPT;
    batch->internal = holder.release();
    return PRETRAIN_OK;
  });
}

void pretrain_batch_release(pretrain_batch_t* batch) {
  if (!batch) return;
  guard([&] {
    delete static_cast<BatchHolder*>(batch->internal);
    clear(batch);
    return PRETRAIN_OK;
  });
}

const pretrain_tensor_t* pretrain_batch_tensor(const pretrain_batch_t* batch, const char* name) {
  if (!batch || !name || !batch->internal) return nullptr;
  for (int32_t i = 0; i < batch->num_tensors && i < PRETRAIN_MAX_TENSORS; ++i)
    if (std::strcmp(batch->tensors[i].name, name) == 0) return &batch->tensors[i];
  return nullptr;
}

int pretrain_loader_state(const pretrain_loader_t* loader, char** json_out) {
  if (json_out) *json_out = nullptr;
  return guard([&] {
    need(loader, "loader");
    need(json_out, "json_out");
    *json_out = copy_string(loader->loader->state().to_json());
    return PRETRAIN_OK;
  });
}

int pretrain_loader_restore(pretrain_loader_t* loader, const char* state_json) {
  return guard([&] {
    need(loader, "loader");
    need(state_json, "state_json");
    pretrain::LoaderState state;
    try {
      state = pretrain::LoaderState::from_json(state_json);
    } catch (const pretrain::UsageError&) {
      throw;
    } catch (const pretrain::Error& e) {
      // A state string that does not parse is the caller's mistake, not the data's.
      throw pretrain::UsageError(pretrain::cat("bad loader state: ", e.what()));
    }
    loader->loader->restore(state);
    loader->last_was_end = false;
    return PRETRAIN_OK;
  });
}

int pretrain_loader_stats(const pretrain_loader_t* loader, pretrain_loader_stats_t* out) {
  return guard([&] {
    need(loader, "loader");
    need(out, "out");
    pretrain::LoaderStats s = loader->loader->stats();
    *out = {s.batches, s.samples, s.seconds, s.samples_per_second, s.wait_seconds, s.wait_ms_per_batch,
            s.read_seconds};
    return PRETRAIN_OK;
  });
}

int pretrain_loader_info(const pretrain_loader_t* loader, pretrain_loader_info_t* out) {
  return guard([&] {
    need(loader, "loader");
    need(out, "out");
    const pretrain::Loader& l = *loader->loader;
    out->kind = l.config().kind == pretrain::ModelKind::bert ? PRETRAIN_KIND_BERT : PRETRAIN_KIND_GPT;
    out->batch_size = l.config().batch_size;
    out->seq_len = l.seq_len();
    out->max_predictions = l.max_predictions();
    out->vocab_size = l.vocab_size();
    out->samples_per_epoch = l.samples_per_epoch();
    out->batches_per_epoch = l.batches_per_epoch();
    return PRETRAIN_OK;
  });
}

int64_t pretrain_loader_special_id(const pretrain_loader_t* loader, const char* token) {
  int64_t id = -1;
  guard([&] {
    need(loader, "loader");
    need(token, "token");
    const auto& ids = loader->loader->special_ids();
    auto it = ids.find(token);
    if (it != ids.end()) id = it->second;
    return PRETRAIN_OK;
  });
  return id;
}

int pretrain_loader_special_ids(const pretrain_loader_t* loader, char** json_out) {
  if (json_out) *json_out = nullptr;
  return guard([&] {
    need(loader, "loader");
    need(json_out, "json_out");
    *json_out = copy_string(nlohmann::json(loader->loader->special_ids()).dump());
    return PRETRAIN_OK;
  });
}

int pretrain_loader_config(const pretrain_loader_t* loader, char** json_out) {
  if (json_out) *json_out = nullptr;
  return guard([&] {
    need(loader, "loader");
    need(json_out, "json_out");
    *json_out = copy_string(pretrain::loader_config_to_json(loader->loader->config()).dump());
    return PRETRAIN_OK;
  });
}

void pretrain_string_free(char* s) { std::free(s); }

}  // extern "C"
