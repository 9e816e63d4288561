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
  string(JOIN " " D9M_FP_FLAGS_STRING ${D9M_FP_FLAGS} ${D9M_CUDA_FP_FLAGS})
endif()
message(STATUS "d9m: CUDA variants ${D9M_HAVE_CUDA} (D9M_CUDA=${D9M_CUDA}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
