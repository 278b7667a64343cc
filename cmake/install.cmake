# Installation and the exported CMake package (DESIGN.md §1): after
# `cmake --install build --prefix P`, another project finds kiln with
# find_package(kiln) (kiln_DIR=P/lib/cmake/kiln, or P in CMAKE_PREFIX_PATH)
# and links kiln::kiln. Layout under P:
#   lib/libkiln.so                     the library
#   include/kiln/<layer>/*.h           public headers, <kiln/frontend/kiln.h>
#   lib/cmake/kiln/                    kilnConfig.cmake, version, targets
#   bin/irdump, bin/kiln-bench, bin/kiln-env, bin/kiln-run   the tools, where they are built
#   bin/kiln-bench-torch.py            kiln-bench --compare-torch's PyTorch side
# tests/install/ checks all of it by building examples/ against an install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# Kiln's headers are C++20; users of the package get the same standard.
target_compile_features(kiln PUBLIC cxx_std_20)

# libLLVM comes from a system library directory on Debian, but an LLVM found
# elsewhere does not: keep the directories of the libraries kiln links in its
# installed RPATH so that the installed libkiln.so loads without
# LD_LIBRARY_PATH. Directories the linker searches by default are left out.
# (NVRTC is not linked: libkiln.so opens it at run time, trying the build's
# toolkit directory too; Note [NVRTC is loaded at run time].)
set_target_properties(kiln PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS kiln EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers keep their layer folder: include/kiln/ir/graph.h is included
# as <kiln/ir/graph.h> by users and as "ir/graph.h" by kiln's own headers.
# The llvm_* headers include LLVM's and stay private to codegen's sources.
foreach(layer runtime ir passes codegen frontend)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${layer}
    FILES_MATCHING
      PATTERN "*.h"
      PATTERN "*.def"
      PATTERN "llvm_*" EXCLUDE)
endforeach()

# The tools find libkiln.so next to them, in ../lib.
foreach(tool irdump kiln-bench kiln-env kiln-run)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
      INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
if(TARGET kiln-bench)  # its PyTorch side, found next to it (--compare-torch)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/kiln-bench/torch_bench.py
    DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME kiln-bench-torch.py)
endif()

install(EXPORT kilnTargets
  NAMESPACE kiln::
  FILE kilnTargets.cmake
  DESTINATION ${KILN_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake
  INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
# Before 1.0 a minor release may change the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake
  ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_INSTALL_CMAKEDIR})
