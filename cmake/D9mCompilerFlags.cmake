# Floating-point flags are part of what an audit certifies: they are written into the stack
# fingerprint. Contraction is off so that a*b+c is two roundings everywhere, as in the CUDA
# ordered variants (-fmad=false), which is what makes cross-implementation digests comparable.
set(D9M_FP_FLAGS -ffp-contract=off -fno-fast-math)
add_library(d9m_flags INTERFACE)
target_compile_options(d9m_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wno-missing-field-initializers ${D9M_FP_FLAGS}>)
string(JOIN " " D9M_FP_FLAGS_STRING ${D9M_FP_FLAGS})

# Precompiled headers: nlohmann/json, CLI11 and GoogleTest cost 2 to 10 s to parse in every
# translation unit that includes them, which was most of a CI build's C++ time (measured: CLI11
# 9.5 s, nlohmann/json 3.4 s, gtest 2.4 s per TU at -O2). C++ only; the .cu files never see
# them. D9M_PCH=OFF builds without, which is what keeps every file's own #includes honest (the
# ThreadSanitizer build in ci/test.sh does).
option(D9M_PCH "Precompile the heavy third-party headers" ON)
function(d9m_precompile target)
  if(D9M_PCH)
    set(headers <string> <vector> <map> <memory> <optional> <algorithm> <functional> <nlohmann/json.hpp>)
    foreach(header IN LISTS ARGN)
      list(APPEND headers ${header})
    endforeach()
    list(TRANSFORM headers PREPEND "$<$<COMPILE_LANGUAGE:CXX>:")
    list(TRANSFORM headers APPEND ">")
    target_precompile_headers(${target} PRIVATE ${headers})
  endif()
endfunction()
