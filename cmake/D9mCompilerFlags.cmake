# Floating-point flags are part of what an audit certifies: they are written into the stack
# fingerprint. Contraction is off so that a*b+c is two roundings everywhere, as in the CUDA
# ordered variants (-fmad=false), which is what makes cross-implementation digests comparable.
set(D9M_FP_FLAGS -ffp-contract=off -fno-fast-math)
add_library(d9m_flags INTERFACE)
target_compile_options(d9m_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wno-missing-field-initializers ${D9M_FP_FLAGS}>)
string(JOIN " " D9M_FP_FLAGS_STRING ${D9M_FP_FLAGS})
