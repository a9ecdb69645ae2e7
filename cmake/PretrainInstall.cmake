# `cmake --install build --prefix P`: the tools (each folder's pretrain_install_tool(<tool>)), and the
# libraries as a package other projects consume:
#   P/include/pretrain/<folder>/*.h            headers, included as "loader/loader.h" (as in-tree)
#   P/lib/libpretrain_<component>.a
#   P/lib/cmake/pretrain/                      find_package(pretrain CONFIG COMPONENTS …) →
#                                              pretrain::<component>, third-party deps found too
#   P/lib/pkgconfig/pretrain_<component>.pc    for C and other build systems
# Each library's dependencies, for the CMake package and the .pc files alike, are read off its
# target_link_libraries (one source of truth) and mapped to cmake/PretrainFindDependency.cmake's
# entries; a library linking something that file does not know stops configuration here.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(PRETRAIN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/pretrain)
set(PRETRAIN_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/pretrain)
set_property(GLOBAL PROPERTY PRETRAIN_COMPONENTS "")

# Every command users type, as one target: scripts/demo.sh builds `pretrain_tools pretrain_python`,
# so a new tool is in the demo's build without anyone editing the demo's target list.
add_custom_target(pretrain_tools)
# pretrain_install_tool(<target>): a command, installed into bin/ and built by pretrain_tools.
function(pretrain_install_tool target)
  install(TARGETS ${target})
  add_dependencies(pretrain_tools ${target})
endfunction()

# pretrain_install_library(<component> <folder> "<description>" [INTERNAL_HEADERS h...])
# Installs pretrain_<component> as pretrain::<component> (an alias of that name works in-tree
# too) with the headers of <folder> and its subfolders ("": they come with another component's),
# but *_internal.h and INTERNAL_HEADERS: those only the library's own sources include, which may
# pull in private dependencies' headers (hdf5.h). Consumers include them as in-tree code does.
function(pretrain_install_library component folder description)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "INTERNAL_HEADERS")
  set(target pretrain_${component})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${component})
  add_library(pretrain::${component} ALIAS ${target})
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${PRETRAIN_INSTALL_INCLUDEDIR}>)
  install(TARGETS ${target} EXPORT pretrain-${component}-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT pretrain-${component}-targets NAMESPACE pretrain:: DESTINATION ${PRETRAIN_INSTALL_CMAKEDIR})
  set(headers "")
  if(folder)
    file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR}/${folder} CONFIGURE_DEPENDS
         ${PROJECT_SOURCE_DIR}/${folder}/*.h)
  endif()
  foreach(header IN LISTS headers)
    if(NOT header IN_LIST arg_INTERNAL_HEADERS AND NOT header MATCHES "_internal\\.h$")
      get_filename_component(subdir ${folder}/${header} DIRECTORY)
      install(FILES ${PROJECT_SOURCE_DIR}/${folder}/${header} DESTINATION ${PRETRAIN_INSTALL_INCLUDEDIR}/${subdir})
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY PRETRAIN_COMPONENTS ${component})
  set_property(TARGET ${target} PROPERTY PRETRAIN_DESCRIPTION "${description}")
endfunction()

# pretrain_link_dependency(<target> <item> <internal_var> <external_var>): which of our components
# or which PretrainFindDependency entry a target_link_libraries item is ("" for build-only items).
function(pretrain_link_dependency target item internal_var external_var)
  set(internal "")
  set(external "")
  if(item MATCHES "^\\$<BUILD_INTERFACE:" OR item MATCHES "^::@")
    # build-only (warning flags) or CMake's directory marker: nothing a consumer needs
  elseif(item MATCHES "^pretrain_(.+)$" AND TARGET ${item})
    set(internal ${CMAKE_MATCH_1})
  else()
    foreach(dependency IN LISTS PRETRAIN_DEPENDENCIES)
      pretrain_dependency_field(${dependency} TARGETS targets)
      if(item IN_LIST targets)
        set(external ${dependency})
      endif()
    endforeach()
    if(NOT external)
      message(FATAL_ERROR "${target} links '${item}', which cmake/PretrainFindDependency.cmake has no "
                          "entry for: add one there, so that the installed package can find it")
    endif()
  endif()
  set(${internal_var} ${internal} PARENT_SCOPE)
  set(${external_var} ${external} PARENT_SCOPE)
endfunction()

# The link flags of an imported target whose library has no pkg-config module.
function(pretrain_dependency_libs item out)
  if(item STREQUAL "Threads::Threads")
    set(libs "-pthread")
  elseif(item STREQUAL "BZip2::BZip2")
    set(libs "-lbz2")
  elseif(item STREQUAL "CUDA::cudart_static")  # cudart_static needs libdl and librt
    set(libs "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt -pthread")
  elseif(item MATCHES "^CUDA::(cublas|cublasLt)$")
    set(libs "-L${CUDAToolkit_LIBRARY_DIR} -l${CMAKE_MATCH_1}")
  elseif(item STREQUAL "NCCL::NCCL")
    get_filename_component(dir ${NCCL_LIBRARY} DIRECTORY)
    set(libs "-L${dir} -lnccl")
  else()
    message(FATAL_ERROR "cmake/PretrainInstall.cmake: no link flags for '${item}' (it has no pkg-config module)")
  endif()
  set(${out} "${libs}" PARENT_SCOPE)
endfunction()

# Call once, after every pretrain_install_library: writes the package files and the .pc files.
function(pretrain_install_package)
  get_property(components GLOBAL PROPERTY PRETRAIN_COMPONENTS)
  set(component_lists "")
  # The C++ runtime a C program must add to link our static libraries (stdc++ and m with GCC).
  set(cxx_runtime "")
  foreach(lib IN LISTS CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
    if(NOT lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES AND NOT lib IN_LIST cxx_runtime)
      list(APPEND cxx_runtime ${lib})
    endif()
  endforeach()
  list(TRANSFORM cxx_runtime PREPEND "-l")
  list(JOIN cxx_runtime " " cxx_runtime)
  file(RELATIVE_PATH pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  string(REGEX REPLACE "/$" "" pc_to_prefix "${pc_to_prefix}")

  foreach(component IN LISTS components)
    set(target pretrain_${component})
    get_target_property(link ${target} LINK_LIBRARIES)
    get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
    get_target_property(description ${target} PRETRAIN_DESCRIPTION)
    set(internal_deps "")
    set(external_deps "")
    set(requires "")
    set(requires_private "")
    set(libs "")
    set(libs_private "")
    foreach(item IN LISTS link)
      pretrain_link_dependency(${target} "${item}" internal external)
      set(public FALSE)
      if(item IN_LIST interface)
        set(public TRUE)  # a private item of a static library shows up as $<LINK_ONLY:item>
      endif()
      if(internal)
        if(NOT internal IN_LIST components)
          message(FATAL_ERROR "${target} links ${item}, which is not installed (pretrain_install_library)")
        endif()
        list(APPEND internal_deps ${internal})
        if(public)
          list(APPEND requires pretrain_${internal})
        else()
          list(APPEND requires_private pretrain_${internal})
        endif()
      elseif(external)
        list(APPEND external_deps ${external})
        pretrain_dependency_field(${external} PKGCONFIG modules)
        if(NOT modules)
          pretrain_dependency_libs(${item} flags)
          if(public)
            list(APPEND libs "${flags}")
          else()
            list(APPEND libs_private "${flags}")
          endif()
        elseif(public)
          list(APPEND requires ${modules})
        else()
          list(APPEND requires_private ${modules})
        endif()
      endif()
    endforeach()
    if(component STREQUAL "common" AND cxx_runtime)
      list(APPEND libs_private "${cxx_runtime}")
    endif()
    foreach(var internal_deps external_deps requires requires_private libs libs_private)
      list(REMOVE_DUPLICATES ${var})
    endforeach()
    list(REMOVE_ITEM requires_private ${requires})
    string(APPEND component_lists "set(_pretrain_${component}_components ${internal_deps})\n"
                                  "set(_pretrain_${component}_dependencies ${external_deps})\n")
    list(JOIN requires " " requires)
    list(JOIN requires_private " " requires_private)
    # Flags, not pairs: "-L<cuda> -lcublas" and "-L<cuda> -lcublasLt" share their -L.
    foreach(var libs libs_private)
      string(REPLACE " " ";" ${var} "${${var}}")
      list(REMOVE_DUPLICATES ${var})
    endforeach()
    list(PREPEND libs "-L\${libdir} -l${target}")
    list(JOIN libs " " libs)
    list(JOIN libs_private " " libs_private)
    file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/pkgconfig/${target}.pc CONTENT
"prefix=\${pcfiledir}/${pc_to_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${PRETRAIN_INSTALL_INCLUDEDIR}

Name: ${target}
Description: pretrain suite: ${description}. A static library: link with pkg-config --static
Version: ${PROJECT_VERSION}
Requires: ${requires}
Requires.private: ${requires_private}
Cflags: -I\${includedir}
Libs: ${libs}
Libs.private: ${libs_private}
")
    install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${target}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  endforeach()

  set(PRETRAIN_COMPONENT_LISTS "${component_lists}")
  list(JOIN components " " PRETRAIN_ALL_COMPONENTS)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pretrainConfig.cmake.in
    ${PROJECT_BINARY_DIR}/cmake/pretrainConfig.cmake INSTALL_DESTINATION ${PRETRAIN_INSTALL_CMAKEDIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/pretrainConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/cmake/pretrainConfig.cmake
                ${PROJECT_BINARY_DIR}/cmake/pretrainConfigVersion.cmake
                ${PROJECT_SOURCE_DIR}/cmake/PretrainFindDependency.cmake
          DESTINATION ${PRETRAIN_INSTALL_CMAKEDIR})
endfunction()
