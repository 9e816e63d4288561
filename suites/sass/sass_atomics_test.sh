#!/usr/bin/env bash
# What docs/PERFORMANCE.md ("16-bit atomics under contention") and the README say the kernels'
# atomics compile to, read off this build's machine code with bench/sass_atomics.sh: f32 and f64
# atomicAdd a hardware reduction, f16 and bf16 a compare-and-swap loop, and TensorFlow's bias
# gradient kernel (cuda.shared_atomic) adding in shared memory first. If a toolkit or a change to
# kernels/common/accumulate_cuda.cuh makes these otherwise, the text is wrong and this fails.
# Exit 77 (skip) without cuobjdump.
#   sass_atomics_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: sass_atomics_test.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
if [ -z "$cuobjdump" ] && [ -x /usr/local/cuda/bin/cuobjdump ]; then cuobjdump=/usr/local/cuda/bin/cuobjdump; fi
if [ -z "$cuobjdump" ] || [ ! -x "$cuobjdump" ]; then
  echo "SKIP: no cuobjdump (ci/deps.sh fetches one; or set CUOBJDUMP)"
  exit 77
fi
listing=$(CUOBJDUMP=$cuobjdump "$root/bench/sass_atomics.sh" "$build" 'bias_add' '*bias_add*')
fail=0
expect() {  # expect KERNEL_REGEX INSTRUCTION_REGEX WHAT
  if ! grep -E -- "$1" <<< "$listing" | cut -f3- | grep -Eq -- "$2"; then
    echo "FAIL: $3: no $2 in $1" >&2
    fail=1
  fi
}
refuse() {  # refuse KERNEL_REGEX INSTRUCTION_REGEX WHAT
  if grep -E -- "$1" <<< "$listing" | cut -f3- | grep -Eq -- "$2"; then
    echo "FAIL: $3: $2 in $1" >&2
    fail=1
  fi
}
expect 'atomic_kernel<float, d9m::bias_add::GradRows<float>' '^REDG\.E\.ADD\.F32' 'f32 atomicAdd is a hardware reduction'
refuse 'atomic_kernel<float, d9m::bias_add::GradRows<float>' 'CAS' 'f32 atomicAdd is no CAS loop'
expect 'atomic_kernel<double, d9m::bias_add::GradRows<double>' '^REDG\.E\.ADD\.F64' 'f64 atomicAdd is a hardware reduction'
for t in BFloat16 Half; do
  expect "atomic_kernel<d9m::$t, d9m::bias_add::GradRows<d9m::$t>" '^ATOM\.E\.CAS.*CAS loop$' "$t atomicAdd is a CAS loop"
  refuse "atomic_kernel<d9m::$t, d9m::bias_add::GradRows<d9m::$t>" '^(RED|ATOM)[A-Z]*\.E\.ADD' "$t atomicAdd is no hardware add"
  expect "grad_shared_atomic_kernel<d9m::$t, int>" '^ATOMS\.CAST\.SPIN[[:space:]]CAS loop$' "TF's kernel at $t adds f32 in shared memory by a CAS spin"
done
expect 'grad_shared_atomic_kernel<float, int>' '^REDG\.E\.ADD\.F32' "TF's kernel adds each block's f32 sums with a hardware reduction"
[ "$fail" -eq 0 ] || { echo "$listing" | cut -c1-300 >&2; exit 1; }
echo "OK: $(wc -l <<< "$listing") atomic forms in bias_add's kernels, as documented"
