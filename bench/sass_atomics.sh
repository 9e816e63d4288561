#!/usr/bin/env bash
# What the atomics of d9m's CUDA kernels compile to, read off the machine code of a build:
# one line per kernel and atomic instruction form (tab-separated: object, kernel, instruction, and
# "CAS loop" where the add is a compare-and-swap retried until it holds rather than a hardware add).
# Why: a variant's cost under contention depends on it. On sm_90 with CUDA 13, atomicAdd on f32
# and f64 is a hardware reduction (REDG.E.ADD.F32 / .F64), but on __half and __nv_bfloat16 it is a
# 32-bit CAS loop (ATOM.E.CAS) and on shared memory floats a CAS spin (ATOMS.CAST.SPIN).
#   bench/sass_atomics.sh BUILD_DIR [KERNEL_REGEX [OBJECT_GLOB]]
# (OBJECT_GLOB, matched against the object's path, limits the objects read: '*bias_add*'.)
# cuobjdump comes from $CUOBJDUMP, PATH, or /usr/local/cuda/bin; toolkits without it can use the
# one in PyPI's nvidia-cuda-cuobjdump wheel (bin/cuobjdump), with NVDISASM_PATH naming the folder
# of nvidia-cuda-nvdisasm's bin/nvdisasm, which it calls (ci/deps.sh fetches both).
set -euo pipefail
build=${1:?usage: bench/sass_atomics.sh BUILD_DIR [KERNEL_REGEX [OBJECT_GLOB]]}
filter=${2:-.}
object_glob=${3:-*}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
if [ -z "$cuobjdump" ] && [ -x /usr/local/cuda/bin/cuobjdump ]; then cuobjdump=/usr/local/cuda/bin/cuobjdump; fi
if [ -z "$cuobjdump" ]; then
  echo "sass_atomics.sh: no cuobjdump: set CUOBJDUMP (the CUDA toolkit's, or bin/cuobjdump of PyPI's nvidia-cuda-cuobjdump wheel)" >&2
  exit 2
fi
objects=$(find "$build" -name '*.cu.o' -path '*kernels*' -path "$object_glob" | sort)
if [ -z "$objects" ]; then
  echo "sass_atomics.sh: no CUDA objects of kernels/ under $build (a build with CUDA?)" >&2
  exit 2
fi
# A cuobjdump that cannot disassemble (no nvdisasm) says so on the first object, not as an empty list.
first=${objects%%$'\n'*}
if ! why=$("$cuobjdump" -sass "$first" 2>&1 > /dev/null); then
  echo "sass_atomics.sh: $cuobjdump -sass $first failed: $why" >&2
  exit 2
fi
for obj in $objects; do
  "$cuobjdump" -sass "$obj" | awk -v obj="${obj#"$build"/}" '
    /Function :/ { fn = $3 }
    match($0, /(ATOMS|ATOMG|ATOM|REDG|RED)\.[A-Z0-9._]+/) {
      ins = substr($0, RSTART, RLENGTH)
      key = fn "\t" ins
      if (!(key in seen)) {
        seen[key] = 1
        print obj "\t" fn "\t" ins "\t" (ins ~ /CAS/ ? "CAS loop" : "")
      }
    }'
done | c++filt | grep -E -- "$filter" || true
