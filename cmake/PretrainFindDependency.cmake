# How each third-party library the pretrain libraries link is found, in one place for two users:
# our own build (cmake/PretrainDependencies.cmake) and projects that use the installed package
# (pretrainConfig.cmake ships this file). The libraries are static, so a consumer links their
# private dependencies too and must find exactly the imported targets our target_link_libraries
# name; cmake/PretrainInstall.cmake maps those targets back to the entries here to write the
# package's per-component dependency lists and the pkg-config files.
#
# Every lookup works in a C++-only consumer project (no C or CUDA language enabled): that is why
# HDF5 comes from pkg-config (FindHDF5's C component try-compiles C) and CUDA from FindCUDAToolkit.

# Entries: name, the imported targets it provides, its pkg-config modules (or the link flags when
# it has none; filled in by the lookup), the Debian package that holds it.
set(PRETRAIN_DEPENDENCIES CLI11 nlohmann_json TBB Threads xxhash HDF5 zstd ZLIB libdeflate ISAL BZip2
    ICU SentencePiece EXPAT MPI OpenBLAS CUDAToolkit NCCL)
set(PRETRAIN_DEPENDENCY_CLI11 TARGETS CLI11::CLI11 PKGCONFIG CLI11 DEBIAN libcli11-dev)
set(PRETRAIN_DEPENDENCY_nlohmann_json TARGETS nlohmann_json::nlohmann_json PKGCONFIG nlohmann_json DEBIAN nlohmann-json3-dev)
set(PRETRAIN_DEPENDENCY_TBB TARGETS TBB::tbb PKGCONFIG tbb DEBIAN libtbb-dev)
set(PRETRAIN_DEPENDENCY_Threads TARGETS Threads::Threads DEBIAN libc6-dev)
set(PRETRAIN_DEPENDENCY_xxhash TARGETS PkgConfig::XXHASH PKGCONFIG libxxhash DEBIAN libxxhash-dev)
set(PRETRAIN_DEPENDENCY_HDF5 TARGETS HDF5::HDF5 PKGCONFIG hdf5 DEBIAN libhdf5-dev)
set(PRETRAIN_DEPENDENCY_zstd TARGETS PkgConfig::ZSTD PKGCONFIG libzstd DEBIAN libzstd-dev)
set(PRETRAIN_DEPENDENCY_ZLIB TARGETS ZLIB::ZLIB PKGCONFIG zlib DEBIAN zlib1g-dev)
set(PRETRAIN_DEPENDENCY_libdeflate TARGETS PkgConfig::LIBDEFLATE PKGCONFIG libdeflate DEBIAN libdeflate-dev)
set(PRETRAIN_DEPENDENCY_ISAL TARGETS PkgConfig::ISAL PKGCONFIG libisal DEBIAN libisal-dev)
set(PRETRAIN_DEPENDENCY_BZip2 TARGETS BZip2::BZip2 DEBIAN libbz2-dev)  # Debian ships no bzip2.pc
set(PRETRAIN_DEPENDENCY_ICU TARGETS ICU::uc ICU::i18n PKGCONFIG icu-uc icu-i18n DEBIAN libicu-dev)
set(PRETRAIN_DEPENDENCY_SentencePiece TARGETS PkgConfig::SENTENCEPIECE PKGCONFIG sentencepiece DEBIAN libsentencepiece-dev)
set(PRETRAIN_DEPENDENCY_EXPAT TARGETS EXPAT::EXPAT PKGCONFIG expat DEBIAN libexpat1-dev)
set(PRETRAIN_DEPENDENCY_MPI TARGETS MPI::MPI_CXX PKGCONFIG mpi-cxx DEBIAN "libopenmpi-dev openmpi-bin")
set(PRETRAIN_DEPENDENCY_OpenBLAS TARGETS PkgConfig::OPENBLAS PKGCONFIG openblas DEBIAN libopenblas-dev)
set(PRETRAIN_DEPENDENCY_CUDAToolkit TARGETS CUDA::cudart_static CUDA::cublas CUDA::cublasLt DEBIAN nvidia-cuda-toolkit)
set(PRETRAIN_DEPENDENCY_NCCL TARGETS NCCL::NCCL DEBIAN libnccl-dev)

# pretrain_dependency_field(<name> <TARGETS|PKGCONFIG|DEBIAN> <out>): one field of an entry above.
function(pretrain_dependency_field name field out)
  cmake_parse_arguments(_e "" "" "TARGETS;PKGCONFIG;DEBIAN" ${PRETRAIN_DEPENDENCY_${name}})
  set(${out} "${_e_${field}}" PARENT_SCOPE)
endfunction()

# pretrain_find_dependency(<name> <found_var>): looks the library up (quietly) and defines the
# imported targets of its entry; <found_var> says whether it worked. A second call is cheap.
macro(pretrain_find_dependency _pfd_name _pfd_found)
  set(${_pfd_found} FALSE)
  if("${_pfd_name}" STREQUAL "CLI11" OR "${_pfd_name}" STREQUAL "nlohmann_json" OR "${_pfd_name}" STREQUAL "TBB")
    find_package(${_pfd_name} CONFIG QUIET)
    set(${_pfd_found} ${${_pfd_name}_FOUND})
  elseif("${_pfd_name}" STREQUAL "Threads")
    find_package(Threads QUIET)
    set(${_pfd_found} ${Threads_FOUND})
  elseif("${_pfd_name}" STREQUAL "HDF5")
    # Debian's hdf5.pc is the serial library (/usr/include/hdf5/serial), the one FindHDF5 picks.
    if(NOT TARGET HDF5::HDF5)
      find_package(PkgConfig QUIET)
      if(PKG_CONFIG_FOUND)
        pkg_check_modules(PRETRAIN_HDF5 QUIET IMPORTED_TARGET hdf5)
      endif()
      if(TARGET PkgConfig::PRETRAIN_HDF5)
        add_library(HDF5::HDF5 INTERFACE IMPORTED)
        target_link_libraries(HDF5::HDF5 INTERFACE PkgConfig::PRETRAIN_HDF5)
      endif()
    endif()
    if(TARGET HDF5::HDF5)
      set(${_pfd_found} TRUE)
    endif()
  elseif("${_pfd_name}" STREQUAL "ICU")
    find_package(ICU COMPONENTS uc i18n QUIET)
    set(${_pfd_found} ${ICU_FOUND})
  elseif("${_pfd_name}" STREQUAL "ZLIB" OR "${_pfd_name}" STREQUAL "EXPAT")
    find_package(${_pfd_name} QUIET)
    set(${_pfd_found} ${${_pfd_name}_FOUND})
  elseif("${_pfd_name}" STREQUAL "BZip2")
    find_package(BZip2 QUIET)
    set(${_pfd_found} ${BZIP2_FOUND})
  elseif("${_pfd_name}" STREQUAL "MPI")
    find_package(MPI COMPONENTS CXX QUIET)
    set(${_pfd_found} ${MPI_CXX_FOUND})
  elseif("${_pfd_name}" STREQUAL "CUDAToolkit")
    if(NOT CUDAToolkit_FOUND AND NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda/bin/nvcc)
      set(CUDAToolkit_ROOT /usr/local/cuda)  # NVIDIA's installer puts it here, often off PATH
    endif()
    find_package(CUDAToolkit QUIET)
    set(${_pfd_found} ${CUDAToolkit_FOUND})
  elseif("${_pfd_name}" STREQUAL "NCCL")
    if(NOT TARGET NCCL::NCCL)
      find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
      find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
      if(NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
        add_library(NCCL::NCCL UNKNOWN IMPORTED)
        set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                              INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
      endif()
    endif()
    if(TARGET NCCL::NCCL)
      set(${_pfd_found} TRUE)
    endif()
  else()
    # The rest come from pkg-config as PkgConfig::<PREFIX>, the prefix named in the entry's target.
    pretrain_dependency_field(${_pfd_name} TARGETS _pfd_targets)
    pretrain_dependency_field(${_pfd_name} PKGCONFIG _pfd_modules)
    if(NOT _pfd_targets MATCHES "^PkgConfig::")
      message(FATAL_ERROR "cmake/PretrainFindDependency.cmake: no lookup for dependency '${_pfd_name}'")
    endif()
    string(REPLACE "PkgConfig::" "" _pfd_prefix "${_pfd_targets}")
    if(NOT TARGET ${_pfd_targets})
      find_package(PkgConfig QUIET)
      if(PKG_CONFIG_FOUND)
        pkg_check_modules(${_pfd_prefix} QUIET IMPORTED_TARGET ${_pfd_modules})
      endif()
    endif()
    if(TARGET ${_pfd_targets})
      set(${_pfd_found} TRUE)
    endif()
  endif()
endmacro()
