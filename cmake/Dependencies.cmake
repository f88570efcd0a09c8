# Finds every third-party dependency once, as imported targets. On a cluster without root, point
# CMake at the modules: -DCMAKE_PREFIX_PATH="<torch cmake dir>;<hdf5>;<yaml-cpp>..." and
# -DMETIS_ROOT=<prefix> (README, "Building on a cluster").
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# METIS ships neither a CMake config nor a .pc file.
find_path(METIS_INCLUDE_DIR metis.h HINTS ${METIS_ROOT} ENV METIS_ROOT PATH_SUFFIXES include)
find_library(METIS_LIBRARY metis HINTS ${METIS_ROOT} ENV METIS_ROOT
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
if(NOT METIS_INCLUDE_DIR OR NOT METIS_LIBRARY)
  message(FATAL_ERROR "METIS not found: install libmetis-dev or pass -DMETIS_ROOT=<prefix>")
endif()
add_library(METIS::METIS UNKNOWN IMPORTED)
set_target_properties(METIS::METIS PROPERTIES IMPORTED_LOCATION "${METIS_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${METIS_INCLUDE_DIR}")

if(ADGNN_CUDA)
  # Before enable_language(CUDA), which otherwise sets nvcc's default architecture.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
endif()
if(ADGNN_CUDA OR ADGNN_NCCL)
  find_package(CUDAToolkit REQUIRED)  # CUDA::cudart (the NCCL backend is C++: no nvcc needed)
endif()
if(ADGNN_NCCL)
  # NCCL_ROOT (CMake or environment variable) first, alone: PyTorch's wheel (nvidia/nccl) has
  # include/nccl.h and lib/libnccl.so.2 but no libnccl.so link. Then the CUDA toolkit and the
  # system paths.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ENV NCCL_ROOT PATH_SUFFIXES include
            NO_DEFAULT_PATH)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${NCCL_ROOT} ENV NCCL_ROOT
               PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
               PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "NCCL not found: pass -DNCCL_ROOT=<prefix with include/nccl.h and "
                        "lib/libnccl.so[.2]>")
  endif()
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  set(NCCL_VERSION "")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _m "${_nccl_defines}")
    list(APPEND NCCL_VERSION "${CMAKE_MATCH_1}")
  endforeach()
  list(JOIN NCCL_VERSION "." NCCL_VERSION)
  if(NCCL_VERSION VERSION_LESS 2.14)
    message(FATAL_ERROR "NCCL ${NCCL_VERSION} at ${NCCL_INCLUDE_DIR}: the NCCL backend needs >= "
                        "2.14 (non-blocking communicators)")
  endif()
  message(STATUS "NCCL ${NCCL_VERSION}: ${NCCL_INCLUDE_DIR}/nccl.h, ${NCCL_LIBRARY}")
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()

# PT-Scotch (the distributed partitioner), its 64-bit-index build: Debian's libptscotch-dev puts it
# under include/scotch-int64 and lib/<arch>/scotch-int64. Elsewhere: -DSCOTCH_ROOT=<prefix> of a
# build with 64-bit SCOTCH_Num.
find_path(PTSCOTCH_INCLUDE_DIR ptscotch.h HINTS ${SCOTCH_ROOT} ENV SCOTCH_ROOT
          PATH_SUFFIXES include/scotch-int64 include NO_DEFAULT_PATH)
find_path(PTSCOTCH_INCLUDE_DIR ptscotch.h PATH_SUFFIXES scotch-int64)
foreach(_lib ptscotch scotch ptscotcherr)
  find_library(PTSCOTCH_${_lib}_LIBRARY ${_lib} HINTS ${SCOTCH_ROOT} ENV SCOTCH_ROOT
               PATH_SUFFIXES lib/x86_64-linux-gnu/scotch-int64 lib/scotch-int64 lib lib64 NO_DEFAULT_PATH)
  find_library(PTSCOTCH_${_lib}_LIBRARY ${_lib} PATH_SUFFIXES scotch-int64
               PATHS /usr/lib/x86_64-linux-gnu/scotch-int64 NO_DEFAULT_PATH)
  if(NOT PTSCOTCH_${_lib}_LIBRARY)
    message(FATAL_ERROR "PT-Scotch not found: install libptscotch-dev or pass -DSCOTCH_ROOT=<prefix>")
  endif()
endforeach()
if(NOT PTSCOTCH_INCLUDE_DIR)
  message(FATAL_ERROR "PT-Scotch not found: install libptscotch-dev or pass -DSCOTCH_ROOT=<prefix>")
endif()
add_library(PTScotch::PTScotch INTERFACE IMPORTED)
set_target_properties(PTScotch::PTScotch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${PTSCOTCH_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${PTSCOTCH_ptscotch_LIBRARY};${PTSCOTCH_scotch_LIBRARY};${PTSCOTCH_ptscotcherr_LIBRARY};MPI::MPI_CXX")
message(STATUS "PT-Scotch: ${PTSCOTCH_INCLUDE_DIR}/ptscotch.h, ${PTSCOTCH_ptscotch_LIBRARY}")
