// The Python face of common/error.h, one mapping for every module of the package: UsageError (the
// caller asked for something impossible: a bad option, an id outside the vocabulary) is a
// ValueError, any other Error (a missing or malformed file, a data error) a RuntimeError; what()
// names the file and what was expected, as the commands print it.
#pragma once
#include <pybind11/pybind11.h>

#include <exception>

#include "common/error.h"

namespace pretrain::python {

// Local to the module that registers it: each module links its own copy of the error types.
inline void register_error_translator() {
  pybind11::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace pretrain::python
