# The CUDA backend's build: nvcc, the CUDA runtime, cuDNN, cuBLAS/cuBLASLt and NCCL. They are looked for in the
# CUDA toolkit (/usr/local/cuda, CUDA_HOME, CUDAToolkit_ROOT) and, where the libraries come as Python wheels (as
# PyTorch installs them), in site-packages/nvidia/*. SYSTOLIC_CUDA=AUTO builds the backend when nvcc and cuDNN are
# found; ON makes a missing piece an error; OFF builds for the CPU only.
set(SYSTOLIC_HAS_CUDA OFF)
if(SYSTOLIC_CUDA STREQUAL "OFF")
  message(STATUS "systolic: CUDA backend off (SYSTOLIC_CUDA=OFF)")
  return()
endif()

macro(systolic_cuda_missing what)
  if(SYSTOLIC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "systolic: SYSTOLIC_CUDA=ON but ${what}")
  endif()
  message(STATUS "systolic: CUDA backend off: ${what}")
  return()
endmacro()

if(NOT CMAKE_CUDA_COMPILER)
  find_program(SYSTOLIC_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDAToolkit_ROOT /usr/local/cuda PATH_SUFFIXES bin)
  if(SYSTOLIC_NVCC)
    set(CMAKE_CUDA_COMPILER ${SYSTOLIC_NVCC})
  endif()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  systolic_cuda_missing("nvcc was not found (set CUDA_HOME or put nvcc on PATH)")
endif()

# sm_80 (A100) and sm_90 (H100/H200) machine code, plus PTX for newer GPUs.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
endif()
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
enable_language(CUDA)
# CMake 3.25 does not know nvcc's C++20 flag: tell it (the project's sources are C++20).
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_EXTENSIONS OFF)
string(APPEND CMAKE_CUDA_FLAGS " --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers")
# fmt 9 turns its constexpr off when it sees __NVCC__, then calls its non-constexpr helpers from constexpr functions,
# which the host compiler rejects: .cu files that include systolic's headers (fmt through error.h) need it on.
string(APPEND CMAKE_CUDA_FLAGS " -DFMT_USE_CONSTEXPR=1")
find_package(CUDAToolkit REQUIRED)

# Python wheels: site-packages/nvidia/<lib>/{include,lib}.
set(SYSTOLIC_WHEEL_ROOTS "")
find_program(SYSTOLIC_PYTHON NAMES python3 python)
if(SYSTOLIC_PYTHON)
  execute_process(COMMAND ${SYSTOLIC_PYTHON} -c "import site, sysconfig; print(';'.join(site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()['purelib']]))"
                  OUTPUT_VARIABLE SYSTOLIC_SITE_DIRS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  foreach(dir ${SYSTOLIC_SITE_DIRS})
    if(IS_DIRECTORY ${dir}/nvidia)
      list(APPEND SYSTOLIC_WHEEL_ROOTS ${dir}/nvidia)
    endif()
  endforeach()
endif()

# systolic_find_cuda_library(<prefix> <header> <names...> WHEEL <dir>): <prefix>_INCLUDE_DIR, <prefix>_LIBRARY.
function(systolic_find_cuda_library prefix header wheel)
  set(hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR})
  foreach(root ${SYSTOLIC_WHEEL_ROOTS})
    list(APPEND inc_hints ${root}/${wheel}/include)
    list(APPEND lib_hints ${root}/${wheel}/lib)
  endforeach()
  find_path(${prefix}_INCLUDE_DIR ${header} HINTS ${CUDAToolkit_INCLUDE_DIRS} ${inc_hints} /usr/include)
  find_library(${prefix}_LIBRARY NAMES ${ARGN} HINTS ${CUDAToolkit_LIBRARY_DIR} ${lib_hints}
               PATH_SUFFIXES lib64 lib)
endfunction()
# Wheels ship only the versioned names (libcudnn.so.9), so those are listed too.
systolic_find_cuda_library(CUDNN cudnn.h cudnn cudnn libcudnn.so.9)
systolic_find_cuda_library(CUBLAS cublas_v2.h cublas cublas libcublas.so.13 libcublas.so.12)
systolic_find_cuda_library(CUBLASLT cublasLt.h cublas cublasLt libcublasLt.so.13 libcublasLt.so.12)
systolic_find_cuda_library(NCCL nccl.h nccl nccl libnccl.so.2)
if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
  systolic_cuda_missing("cuDNN was not found (cudnn.h, libcudnn)")
endif()
if(NOT CUBLASLT_INCLUDE_DIR OR NOT CUBLASLT_LIBRARY)
  systolic_cuda_missing("cuBLASLt was not found (cublasLt.h, libcublasLt)")
endif()

add_library(systolic_cuda_libraries INTERFACE)
target_include_directories(systolic_cuda_libraries SYSTEM INTERFACE ${CUDNN_INCLUDE_DIR} ${CUBLASLT_INCLUDE_DIR}
                           ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(systolic_cuda_libraries INTERFACE CUDA::cudart ${CUDNN_LIBRARY} ${CUBLASLT_LIBRARY})
if(CUBLAS_LIBRARY)
  target_link_libraries(systolic_cuda_libraries INTERFACE ${CUBLAS_LIBRARY})
endif()
set(SYSTOLIC_NCCL_FOUND OFF)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(SYSTOLIC_NCCL_FOUND ON)
endif()
# The wheels' libraries are not on the loader's path: bake their directories into the binaries.
foreach(lib ${CUDNN_LIBRARY} ${CUBLASLT_LIBRARY} ${NCCL_LIBRARY})
  get_filename_component(dir ${lib} DIRECTORY)
  list(APPEND CMAKE_BUILD_RPATH ${dir})
  list(APPEND CMAKE_INSTALL_RPATH ${dir})
endforeach()

set(SYSTOLIC_HAS_CUDA ON)
message(STATUS "systolic: CUDA backend on: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}, "
               "cuDNN ${CUDNN_LIBRARY}, cuBLASLt ${CUBLASLT_LIBRARY}, NCCL ${NCCL_LIBRARY}")
