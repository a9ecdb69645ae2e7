# Every dependency is a Debian package; scripts/setup_deps.sh installs them. A missing one stops
# configuration with the package to install, instead of a wall of CMake noise later.
find_package(PkgConfig REQUIRED)

function(pretrain_require found what debian_package)
  if(NOT ${found})
    message(FATAL_ERROR "${what} not found: install the Debian package '${debian_package}' "
                        "(scripts/setup_deps.sh installs every dependency)")
  endif()
endfunction()

find_package(HDF5 COMPONENTS C QUIET)
pretrain_require(HDF5_FOUND "HDF5 (C library)" libhdf5-dev)
if(NOT TARGET HDF5::HDF5)
  add_library(HDF5::HDF5 INTERFACE IMPORTED)
  target_include_directories(HDF5::HDF5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(HDF5::HDF5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
  target_compile_definitions(HDF5::HDF5 INTERFACE ${HDF5_DEFINITIONS})
endif()

find_package(ICU COMPONENTS uc i18n QUIET)
pretrain_require(ICU_FOUND "ICU (uc, i18n)" libicu-dev)

find_package(TBB CONFIG QUIET)
pretrain_require(TBB_FOUND "oneTBB" libtbb-dev)

pkg_check_modules(ZSTD QUIET IMPORTED_TARGET libzstd)
pretrain_require(ZSTD_FOUND "zstd" libzstd-dev)

find_package(BZip2 QUIET)
pretrain_require(BZIP2_FOUND "libbz2" libbz2-dev)

find_package(ZLIB QUIET)
pretrain_require(ZLIB_FOUND "zlib" zlib1g-dev)

# Fast deflate/inflate of HDF5 chunks (formats/deflate.h); zlib stays the reference.
pkg_check_modules(LIBDEFLATE QUIET IMPORTED_TARGET libdeflate)
pretrain_require(LIBDEFLATE_FOUND "libdeflate" libdeflate-dev)
pkg_check_modules(ISAL QUIET IMPORTED_TARGET libisal)
pretrain_require(ISAL_FOUND "ISA-L" libisal-dev)

find_package(EXPAT QUIET)
pretrain_require(EXPAT_FOUND "libexpat" libexpat1-dev)

find_package(MPI COMPONENTS C CXX QUIET)
pretrain_require(MPI_FOUND "MPI (OpenMPI)" "libopenmpi-dev openmpi-bin")

pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
pretrain_require(OPENBLAS_FOUND "OpenBLAS" libopenblas-dev)

find_package(GTest QUIET)
pretrain_require(GTest_FOUND "GoogleTest" libgtest-dev)

find_package(CLI11 CONFIG QUIET)
pretrain_require(CLI11_FOUND "CLI11" libcli11-dev)

find_package(nlohmann_json CONFIG QUIET)
pretrain_require(nlohmann_json_FOUND "nlohmann-json" nlohmann-json3-dev)

pkg_check_modules(XXHASH QUIET IMPORTED_TARGET libxxhash)
pretrain_require(XXHASH_FOUND "xxHash" libxxhash-dev)

pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
pretrain_require(SENTENCEPIECE_FOUND "SentencePiece" libsentencepiece-dev)

# The Python module is for Debian's python3 (it has numpy, h5py, torch; the tests run it), not for
# whichever python3 comes first on PATH.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
find_package(pybind11 CONFIG QUIET)
pretrain_require(pybind11_FOUND "pybind11" pybind11-dev)

find_package(Threads REQUIRED)

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
    find_package(CUDAToolkit REQUIRED)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    if(NOT NCCL_LIBRARY OR NOT NCCL_INCLUDE_DIR)
      message(FATAL_ERROR "CUDA found but NCCL not: install 'libnccl-dev' or set PRETRAIN_CUDA=OFF")
    endif()
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    set(PRETRAIN_HAVE_CUDA ON)
  elseif(PRETRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PRETRAIN_CUDA=ON but nvcc was not found: install the CUDA toolkit "
                        "(Debian 'nvidia-cuda-toolkit') or put /usr/local/cuda/bin on PATH")
  endif()
endif()
message(STATUS "pretrain: CUDA backend ${PRETRAIN_HAVE_CUDA}")
