# Warnings (as errors) and sanitizers for every target of ours, through one interface library.
add_library(pretrain_build_flags INTERFACE)
target_compile_options(pretrain_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${PRETRAIN_WERROR}>>:-Werror>
  # In a unity build (CMakeLists.txt) GCC takes a batch's .cpp files for headers, and warns that a
  # class of one holds a type from its anonymous namespace, which is only a hazard in a real header.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-subobject-linkage>)

if(PRETRAIN_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${_san})
  add_link_options(-fsanitize=address,undefined)
endif()
if(PRETRAIN_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
if(PRETRAIN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PRETRAIN_FUZZ needs clang (CC=clang CXX=clang++): libFuzzer is part of clang")
  endif()
  # UBSan must stop the run as ASan does: in its default recover mode a run prints "runtime error"
  # and fuzzes on, so scripts/fuzz.sh's own build (this option alone; CI's adds PRETRAIN_SANITIZE,
  # which never recovered) could not count such a report as a finding.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# GCC 12 at -O3 (Release) has false positives inside libstdc++: -Wrestrict on `"text" +
# std::to_string(n)` (GCC bug 105329) and -Wmaybe-uninitialized on a std::map member of a
# temporary being destroyed (bug 107138), both fixed in GCC 13. The libraries and tools users
# build are kept free of them by fixing each site; the tests and benchmarks, which nobody
# installs, add these options (add_compile_options in their folders) and are spared only these two.
set(PRETRAIN_SPARED_WARNINGS "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(PRETRAIN_SPARED_WARNINGS $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict> $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()
