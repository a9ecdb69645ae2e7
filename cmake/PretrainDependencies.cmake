# Every dependency is a Debian package; scripts/setup_deps.sh installs them. A missing one stops
# configuration with the package to install, instead of a wall of CMake noise later.
find_package(PkgConfig REQUIRED)

function(pretrain_require found what debian_package)
  if(NOT ${found})
    message(FATAL_ERROR "${what} not found: install the Debian package '${debian_package}' "
                        "(scripts/setup_deps.sh installs every dependency)")
  endif()
endfunction()

# The libraries' own dependencies are found by cmake/PretrainFindDependency.cmake, which the
# installed package reuses for its consumers. ISA-L and libdeflate: fast deflate/inflate of HDF5
# chunks (formats/deflate.h); zlib stays the reference.
include(PretrainFindDependency)
foreach(dependency IN LISTS PRETRAIN_DEPENDENCIES)
  if(dependency STREQUAL "CUDAToolkit" OR dependency STREQUAL "NCCL")
    continue()  # below, when the CUDA backend is on
  endif()
  pretrain_find_dependency(${dependency} found)
  pretrain_dependency_field(${dependency} DEBIAN debian_package)
  pretrain_require(found ${dependency} "${debian_package}")
endforeach()

find_package(GTest QUIET)
pretrain_require(GTest_FOUND "GoogleTest" libgtest-dev)

# The Python module is for Debian's python3 (it has numpy, h5py, torch; the tests run it), not for
# whichever python3 comes first on PATH.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
find_package(pybind11 CONFIG QUIET)
pretrain_require(pybind11_FOUND "pybind11" pybind11-dev)

# CUDA: AUTO turns it on when nvcc and the toolkit are there (CI has nvcc, so CI compiles the
# CUDA objects). Nothing here runs them: a CUDA build must also work on a machine without a GPU.
set(PRETRAIN_HAVE_CUDA OFF)
if(NOT PRETRAIN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90)  # A100, H100 (+ PTX for newer parts)
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know that nvcc 12+ speaks C++20; tell it, so CUDA code shares our headers.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    string(APPEND CMAKE_CUDA_FLAGS " --expt-relaxed-constexpr")
    pretrain_find_dependency(CUDAToolkit found)
    pretrain_require(found "the CUDA toolkit (cudart, cuBLAS)" nvidia-cuda-toolkit)
    pretrain_find_dependency(NCCL found)
    if(NOT found)
      message(FATAL_ERROR "CUDA found but NCCL not: install 'libnccl-dev' or set PRETRAIN_CUDA=OFF")
    endif()
    set(PRETRAIN_HAVE_CUDA ON)
  elseif(PRETRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PRETRAIN_CUDA=ON but nvcc was not found: install the CUDA toolkit "
                        "(Debian 'nvidia-cuda-toolkit') or put /usr/local/cuda/bin on PATH")
  endif()
endif()
message(STATUS "pretrain: CUDA backend ${PRETRAIN_HAVE_CUDA}")

# cuDNN's fused attention (trainer/ops/attention_cudnn.cu): cudnn.h (the CUDA toolkit's, or
# PRETRAIN_CUDNN_INCLUDE_DIR) and NVIDIA's header-only cudnn-frontend, which scripts/setup_deps.sh
# unpacks into .venv/cudnn-frontend/include from PyPI's nvidia-cudnn-frontend. No link dependency:
# the frontend opens libcudnn.so.9 at run time (its dynamic loading), so a binary built here starts
# where cuDNN is missing and its attention falls back to batched GEMMs (trainer/ops/attention.h).
set(PRETRAIN_CUDNN AUTO CACHE STRING "cuDNN fused attention: AUTO (on when CUDA, cudnn.h and cudnn-frontend are found) or OFF")
set(PRETRAIN_HAVE_CUDNN OFF)
if(PRETRAIN_HAVE_CUDA AND NOT PRETRAIN_CUDNN STREQUAL "OFF")
  find_path(PRETRAIN_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_path(PRETRAIN_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${PROJECT_SOURCE_DIR}/.venv/cudnn-frontend/include)
  if(PRETRAIN_CUDNN_INCLUDE_DIR AND PRETRAIN_CUDNN_FRONTEND_INCLUDE_DIR)
    set(PRETRAIN_HAVE_CUDNN ON)
  endif()
endif()
message(STATUS "pretrain: cuDNN fused attention ${PRETRAIN_HAVE_CUDNN}")
