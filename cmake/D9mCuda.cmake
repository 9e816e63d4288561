# Decides whether the CUDA variants are built. AUTO: on when nvcc is found.
# CUDA code is compiled for few architectures to keep CI short; sm_90 (H100/H200) is always in.
set(D9M_HAVE_CUDA OFF)
if(NOT D9M_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(D9M_HAVE_CUDA ON)
  elseif(D9M_CUDA STREQUAL "ON")
    message(FATAL_ERROR "D9M_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()
if(D9M_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  find_package(CUDNN REQUIRED)
  # CMake 3.25's NVIDIA module knows dialects up to C++17; nvcc 12+ takes -std=c++20.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # No fused multiply-add on the device either: a*b+c is two roundings on both sides, which is
  # what lets cuda.ordered reproduce cpu.ordered bit for bit. Recorded in the fingerprint.
  set(D9M_CUDA_FP_FLAGS --fmad=false)
  target_compile_options(d9m_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:${D9M_CUDA_FP_FLAGS} --extended-lambda -Xcompiler=-ffp-contract=off>)
  # Header-only libraries newer than the toolkit's (ci/deps.sh fetches them from pinned wheels).
  # Each is used by few translation units, which add the folder themselves, ahead of the
  # toolkit's own CCCL: see d9m_use_newer_cccl / d9m_use_cudnn_frontend.
  set(D9M_CCCL_INCLUDE "" CACHE PATH "CCCL >= 3.1 headers (nvidia-cuda-cccl wheel: nvidia/cu13/include/cccl)")
  set(D9M_CUDNN_FRONTEND_INCLUDE "" CACHE PATH "cuDNN frontend headers (nvidia-cudnn-frontend wheel: include)")
  if(NOT EXISTS "${D9M_CCCL_INCLUDE}/cuda/__execution/determinism.h")
    message(FATAL_ERROR "D9M_CCCL_INCLUDE='${D9M_CCCL_INCLUDE}' has no cuda/__execution/determinism.h: "
      "CUB's determinism levels need CCCL >= 3.1. Build with ci/deps.sh's d9m_build, which fetches the "
      "pinned nvidia-cuda-cccl wheel, or configure with D9M_CUDA=OFF")
  endif()
  if(NOT EXISTS "${D9M_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend.h")
    message(FATAL_ERROR "D9M_CUDNN_FRONTEND_INCLUDE='${D9M_CUDNN_FRONTEND_INCLUDE}' has no cudnn_frontend.h: "
      "build with ci/deps.sh's d9m_build, which fetches the pinned nvidia-cudnn-frontend wheel, "
      "or configure with D9M_CUDA=OFF")
  endif()
  string(JOIN " " D9M_FP_FLAGS_STRING ${D9M_FP_FLAGS} ${D9M_CUDA_FP_FLAGS})
  # CMake's CUDA targets add the toolkit's link-time copy of the driver library
  # (lib/stubs/libcuda.so), although d9m calls no driver function: without --as-needed it becomes
  # a NEEDED entry and the binaries no longer start on a machine without a driver (where they must
  # run and report "no device"). Debian's GCC passes --as-needed by default, clang does not.
  add_link_options(LINKER:--as-needed)
endif()
message(STATUS "d9m: CUDA variants ${D9M_HAVE_CUDA} (D9M_CUDA=${D9M_CUDA}, architectures ${CMAKE_CUDA_ARCHITECTURES})")

# Puts the newer CCCL ahead of the toolkit's for the given sources only: one translation unit
# sees one CCCL, and CUB's per-architecture namespaces keep the two from meeting at link time.
function(d9m_use_newer_cccl)
  set_property(SOURCE ${ARGN} APPEND PROPERTY INCLUDE_DIRECTORIES "${D9M_CCCL_INCLUDE}")
endfunction()
# The cuDNN frontend is header-only and slow to compile (about 40 s a file): keep its users few.
# A system include: its headers' own warnings (shadowing, conversions) are NVIDIA's, not ours.
function(d9m_use_cudnn_frontend)
  set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS "-isystem${D9M_CUDNN_FRONTEND_INCLUDE}")
endfunction()
