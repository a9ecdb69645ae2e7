// pretrain_loader: the data loader as a Python module (pybind11), for PyTorch or JAX trainers.
//
//   import pretrain_loader, torch
//   loader = pretrain_loader.Loader("shards/", kind="bert", batch_size=32, seed=1)
//   for batch in loader:                         # one epoch; iterate again for the next one
//       ids = torch.from_numpy(batch["input_ids"])  # no copy: the ring slot's memory
//
// Batches are dicts of numpy arrays that point into the loader's ring slot; no byte is copied.
// Every array's `base` is one capsule that owns the Batch: the slot goes back to the ring when the
// last array of the batch (and every tensor made from it) is gone. Holding on to `prefetch` batches
// and asking for another raises instead of waiting forever. With device="cuda" the values are
// DeviceArray objects (__cuda_array_interface__: torch.as_tensor(x, device="cuda") takes them
// without a copy).
//
// Options are the C API's JSON keys (loader/config_json.h) as keyword arguments; ids default to
// int64 here (torch's class targets). Errors: ValueError for bad usage (unknown option, missing
// shard, a state from another run), RuntimeError for data errors, with the file and record.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "loader/config_json.h"
#include "loader/loader.h"
#include "python/error_translator.h"

namespace py = pybind11;
using nlohmann::json;

namespace {

// A Python value (kwargs) as JSON: bools, ints (numpy's too), floats, str and os.PathLike, lists
// and tuples of those, None.
json to_json(py::handle v, const std::string& key) {
  if (v.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance(v, py::module_::import("numpy").attr("bool_"))) return v.cast<bool>();
  if (py::isinstance<py::int_>(v) || PyIndex_Check(v.ptr())) {
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
    if (!i) throw py::error_already_set();
    if (i < py::int_(0)) return i.cast<int64_t>();
    return i.cast<uint64_t>();
  }
  if (py::isinstance<py::float_>(v) || py::hasattr(v, "__float__")) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::hasattr(v, "__fspath__")) return py::module_::import("os").attr("fspath")(v).cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    json out = json::array();
    for (py::handle e : v) out.push_back(to_json(e, key));
    return out;
  }
  throw py::value_error("loader option '" + key + "': cannot use a " +
                        std::string(py::str(py::type::of(v).attr("__name__"))));
}

py::object from_json(const json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

// What keeps a batch's memory alive: the Batch (the slot's lease) and the loader itself (a batch
// may outlive Loader.close() or the Loader object; its ring goes when its last batch does).
struct KeptBatch {
  std::shared_ptr<pretrain::Loader> owner;  // destroyed after `batch`
  pretrain::Batch batch;
};

const char* typestr(pretrain::TensorDType dtype) {
  switch (dtype) {
    case pretrain::TensorDType::u8: return "|u1";
    case pretrain::TensorDType::i8: return "|i1";
    case pretrain::TensorDType::u16: return "<u2";
    case pretrain::TensorDType::i32: return "<i4";
    case pretrain::TensorDType::i64: return "<i8";
  }
  return "";
}

// A tensor in GPU memory, for torch.as_tensor / cupy / numba via __cuda_array_interface__ (v3).
// No "stream" entry: the loader already made the consumer stream wait for the copy.
struct DeviceArray {
  pretrain::Tensor tensor;
  py::object base;  // the capsule owning the batch

  py::dict interface() const {
    py::dict d;
    d["shape"] = tensor.ndim == 1 ? py::make_tuple(tensor.shape[0]) : py::make_tuple(tensor.shape[0], tensor.shape[1]);
    d["typestr"] = typestr(tensor.dtype);
    d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(tensor.data), false);
    d["version"] = 3;
    d["strides"] = py::none();
    return d;
  }
};

class PyLoader {
 public:
  PyLoader(py::object sources, py::kwargs options) {
    json config = json::object();
    for (auto [key, value] : options) {
      std::string k = py::str(key);
      config[k] = to_json(value, k);
    }
    if (py::isinstance<py::str>(sources) || py::hasattr(sources, "__fspath__"))
      sources = py::make_tuple(sources);
    config["sources"] = to_json(sources, "sources");
    if (!config.contains("id_dtype") || config["id_dtype"].is_null()) config["id_dtype"] = "int64";
    pretrain::LoaderConfig parsed = pretrain::loader_config_from_json(config);
    py::gil_scoped_release nogil;  // opening shards may take a while (checksums)
    loader_ = std::make_shared<pretrain::Loader>(std::move(parsed));
  }

  // The next batch of this epoch as a dict, or None at the epoch's end.
  py::object next_batch() {
    std::shared_ptr<pretrain::Loader> loader = live();
    std::optional<pretrain::Batch> batch;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mutex_);
      batch = loader->next();
    }
    if (!batch) return py::none();
    return to_dict(loader, std::move(*batch));
  }

  std::string state() {
    std::shared_ptr<pretrain::Loader> loader = live();
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mutex_);
    return loader->state().to_json();
  }

  void restore(const std::string& text) {
    std::shared_ptr<pretrain::Loader> loader = live();
    pretrain::LoaderState state;
    try {
      state = pretrain::LoaderState::from_json(text);
    } catch (const pretrain::UsageError&) {
      throw;
    } catch (const pretrain::Error& e) {
      throw pretrain::UsageError(pretrain::cat("bad loader state: ", e.what()));
    }
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mutex_);
    loader->restore(state);
  }

  py::dict stats() {
    pretrain::LoaderStats s = live()->stats();
    py::dict d;
    d["batches"] = s.batches;
    d["samples"] = s.samples;
    d["seconds"] = s.seconds;
    d["samples_per_second"] = s.samples_per_second;
    d["wait_seconds"] = s.wait_seconds;
    d["wait_ms_per_batch"] = s.wait_ms_per_batch;
    d["read_seconds"] = s.read_seconds;
    return d;
  }

  // Stops the pipeline now (batches still held keep their memory until they go).
  void close() {
    std::shared_ptr<pretrain::Loader> loader;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mutex_);
      loader.swap(loader_);
    }
    py::gil_scoped_release nogil;
    loader.reset();
  }

  const pretrain::Loader& get() { return *live(); }

 private:
  std::shared_ptr<pretrain::Loader> live() const {
    if (!loader_) throw py::value_error("the loader is closed");
    return loader_;
  }

  static py::dict to_dict(const std::shared_ptr<pretrain::Loader>& loader, pretrain::Batch batch) {
    auto owned = std::make_unique<KeptBatch>(KeptBatch{loader, std::move(batch)});
    KeptBatch* kept = owned.get();
    py::capsule base(kept, "pretrain_loader.Batch", [](PyObject* capsule) {
      delete static_cast<KeptBatch*>(PyCapsule_GetPointer(capsule, "pretrain_loader.Batch"));
    });
    owned.release();  // the capsule owns it now
    py::dict out;
    for (const auto& [name, t] : kept->batch.tensors()) {
      if (t.device >= 0) {
        out[py::str(name)] = py::cast(DeviceArray{t, base});
        continue;
      }
      std::vector<py::ssize_t> shape;
      for (int d = 0; d < t.ndim; ++d) shape.push_back(t.shape[size_t(d)]);
      // Given a base, numpy keeps a reference to it and does not copy `data`.
      out[py::str(name)] = py::array(py::dtype(pretrain::dtype_name(t.dtype)), shape, t.data, base);
    }
    return out;
  }

  std::shared_ptr<pretrain::Loader> loader_;
  std::mutex mutex_;  // one next()/state()/restore() at a time (threads may share a Loader)
};

// `for batch in loader`: the rest of the current epoch. Once it says StopIteration it stays done.
struct EpochIterator {
  py::object loader;  // the PyLoader
  bool done = false;

  py::object next() {
    if (done) throw py::stop_iteration();
    py::object batch = loader.cast<PyLoader&>().next_batch();
    if (batch.is_none()) {
      done = true;
      throw py::stop_iteration();
    }
    return batch;
  }
};

// Loader's docstring: {key} stands for the default of that option, LoaderConfig's (as
// loader_config_to_json spells it), written as Python does (id_dtype's is int64 here).
const char* const kLoaderDoc = R"(Loader(sources, kind="bert", **options)

sources: a manifest.json, a directory holding one, shard files or globs (str, os.PathLike, or a list).
options (defaults in brackets): batch_size [{batch_size}] per rank, seq_len [BERT: the shards'; GPT: required],
rank [{rank}], world_size [{world_size}], seed [{seed}], shuffle [{shuffle}], drop_last [{drop_last}], epochs [{epochs} = no end],
workers [{workers}], prefetch [{prefetch}], device [{device} | "cuda" | "cuda:N"], pin_memory [{pin_memory}],
narrow_tokens [{narrow_tokens}], id_dtype ["int64" | "int32"], shuffle_window [{shuffle_window}], bin_batches [{bin_batches}]
(--bin-size outputs: global batches per bin draw), weights (GPT blends),
add_extra_token [{add_extra_token}], samples_per_epoch [{samples_per_epoch}], verify_checksums [{verify_checksums}], dynamic_masking [{dynamic_masking}],
mask_probability [{mask_probability}], max_predictions [{max_predictions} = the shards'], mask_id, vocab_size, special_ids
[from the manifest's tokenizer], consumer_stream [{consumer_stream}].

Iterating yields the rest of the current epoch's batches, each a dict of numpy arrays that share
the loader's memory (no copy); the batch's ring slot returns to the loader when all its arrays are
gone. Iterate again for the next epoch.)";

std::string with_defaults(const std::string& text) {
  const json defaults = pretrain::loader_config_to_json(pretrain::LoaderConfig{});
  std::string out;
  size_t at = 0;
  for (size_t open; (open = text.find('{', at)) != std::string::npos;) {
    const size_t close = text.find('}', open);
    const json& value = defaults.at(text.substr(open + 1, close - open - 1));
    out += text.substr(at, open - at);
    out += value.is_boolean() ? (value.get<bool>() ? "True" : "False") : value.dump();
    at = close + 1;
  }
  return out + text.substr(at);
}

}  // namespace

PYBIND11_MODULE(pretrain_loader, m) {
  m.doc() =
      "Training batches from pretraining shards (BERT HDF5, Megatron .bin/.idx, llm.c .bin) as numpy "
      "arrays without copies. See Loader.";

  pretrain::python::register_error_translator();

  py::class_<DeviceArray>(m, "DeviceArray",
                          "A batch tensor in GPU memory; torch.as_tensor(x, device='cuda') wraps it without a copy.")
      .def_property_readonly("__cuda_array_interface__", &DeviceArray::interface)
      .def_property_readonly("shape", [](const DeviceArray& a) {
        return a.tensor.ndim == 1 ? py::make_tuple(a.tensor.shape[0]) : py::make_tuple(a.tensor.shape[0], a.tensor.shape[1]);
      })
      .def_property_readonly("dtype", [](const DeviceArray& a) { return pretrain::dtype_name(a.tensor.dtype); })
      .def_property_readonly("device", [](const DeviceArray& a) { return a.tensor.device; });

  py::class_<EpochIterator>(m, "EpochIterator")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &EpochIterator::next);

  static const std::string loader_doc = with_defaults(kLoaderDoc);
  py::class_<PyLoader>(m, "Loader", loader_doc.c_str())
      .def(py::init([](py::object sources, py::object kind, py::kwargs options) {
             options["kind"] = kind;
             return std::make_unique<PyLoader>(sources, options);
           }),
           py::arg("sources"), py::arg("kind") = "bert")
      .def("__iter__", [](py::object self) { return EpochIterator{self}; })
      .def("next_batch", &PyLoader::next_batch,
           "The next batch of the current epoch as a dict of numpy arrays, or None at the epoch's end "
           "(the call after that starts the next epoch).")
      .def("state", &PyLoader::state,
           "Where the consumer is, as a JSON string: the batches returned so far (prefetched ones do not count).")
      .def("restore", &PyLoader::restore, py::arg("state"),
           "Continue from a state() string: the following batches are those an uninterrupted run gives.")
      .def("stats", &PyLoader::stats, "Throughput and wait times as a dict.")
      .def("close", &PyLoader::close, "Stop the pipeline now.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyLoader& self, py::args) { self.close(); })
      .def("__len__", [](PyLoader& self) { return self.get().batches_per_epoch(); })
      .def_property_readonly("samples_per_epoch", [](PyLoader& self) { return self.get().samples_per_epoch(); },
                             "Samples in one epoch over all ranks.")
      .def_property_readonly("batches_per_epoch", [](PyLoader& self) { return self.get().batches_per_epoch(); },
                             "This rank's batches in one epoch.")
      .def_property_readonly("seq_len", [](PyLoader& self) { return self.get().seq_len(); })
      .def_property_readonly("max_predictions", [](PyLoader& self) { return self.get().max_predictions(); })
      .def_property_readonly("vocab_size", [](PyLoader& self) { return self.get().vocab_size(); })
      .def_property_readonly("special_ids", [](PyLoader& self) { return self.get().special_ids(); },
                             "Special token ids from the manifest's tokenizer, {'[CLS]': 101, …}.")
      .def_property_readonly("config", [](PyLoader& self) {
        return from_json(pretrain::loader_config_to_json(self.get().config()));
      }, "Every option in effect.");
}
