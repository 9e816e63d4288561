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
[ "$build" = / ] || build=${build%/}
filter=${2:-.}
object_glob=${3:-*}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
if [ -z "$cuobjdump" ] && [ -x /usr/local/cuda/bin/cuobjdump ]; then cuobjdump=/usr/local/cuda/bin/cuobjdump; fi
if [ -z "$cuobjdump" ]; then
  echo "sass_atomics.sh: no cuobjdump: set CUOBJDUMP (the CUDA toolkit's, or bin/cuobjdump of PyPI's nvidia-cuda-cuobjdump wheel)" >&2
  exit 2
fi
command -v c++filt > /dev/null || { echo "sass_atomics.sh: no c++filt (binutils)" >&2; exit 2; }
# Objects of kernels/ under the build, matched below the build folder (whose own path may hold
# any word), NUL-separated: a path may hold spaces.
objects=()
while IFS= read -r -d '' obj; do objects+=("$obj"); done < <(find -H "$build" -name '*.cu.o' -path "$build/*kernels*" -path "$build/$object_glob" -print0 | sort -z)
if ((${#objects[@]} == 0)); then
  echo "sass_atomics.sh: no CUDA objects of kernels/ under $build matching $object_glob (a build with CUDA?)" >&2
  exit 2
fi
listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
for obj in "${objects[@]}"; do
  # Disassembled to a file first, so that a cuobjdump that fails (no nvdisasm, a bad object) stops
  # the listing with its own message rather than leaving it silently short.
  if ! "$cuobjdump" -sass "$obj" > "$listing.sass" 2> "$listing.err"; then
    echo "sass_atomics.sh: $cuobjdump -sass $obj failed: $(cat "$listing.err")" >&2
    rm -f "$listing.sass" "$listing.err"
    exit 2
  fi
  awk -v obj="${obj#"$build"/}" '
    /Function :/ { fn = $3 }
    match($0, /(ATOMS|ATOMG|ATOM|REDG|RED)\.[A-Z0-9._]+/) {
      ins = substr($0, RSTART, RLENGTH)
      key = fn "\t" ins
      if (!(key in seen)) {
        seen[key] = 1
        print obj "\t" fn "\t" ins "\t" (ins ~ /CAS/ ? "CAS loop" : "")
      }
    }' "$listing.sass" >> "$listing"
done
rm -f "$listing.sass" "$listing.err"
# grep's status 1 is "no line matched": an empty listing, not an error.
c++filt < "$listing" | { grep -E -- "$filter" || [ $? -eq 1 ]; }
