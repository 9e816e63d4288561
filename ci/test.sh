#!/usr/bin/env bash
# Runs d9m's tests on a fresh machine: installs what is missing (as root), configures, builds,
# and runs ctest: unit tests, CLI tests, and one certification test per catalogued case (the GPU
# ones only where there is a GPU). Then the same suites (CPU) under AddressSanitizer and
# UndefinedBehaviorSanitizer, the threaded code under ThreadSanitizer, and the libFuzzer targets
# for a short budget (ci/fuzz.sh); D9M_SANITIZE=0 skips those. Extra arguments go to the first
# ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ci/deps.sh
d9m_install_deps
build=${D9M_BUILD_DIR:-build/test}
d9m_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DD9M_TESTS=ON -DD9M_BENCH=ON  # benchmarks are built, so they cannot rot
# Without a GPU every gpu-labelled test (GPU unit tests, and a certification test per GPU case:
# most of the catalogue's cases) would only report a skip, at about half a second each; they are
# built all the same, and ci/gpu-audit.sh runs them where there is a device.
gpu_tests=()
if ! { command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; }; then
  gpu_tests=(-LE gpu)
  echo "== no GPU here: the gpu-labelled tests ($(ctest --test-dir "$build" -N -L gpu | grep -c 'Test *#')) are left to ci/gpu-audit.sh"
fi
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "${gpu_tests[@]}" "$@"

if [[ ${D9M_SANITIZE:-1} == 1 ]]; then
  echo "== ASan + UBSan: unit, CLI and CPU certification suites"
  # Three trials per certification case: the sanitizers look for memory errors and undefined
  # behaviour, which one trial shows as well as twenty; the statistics are the first ctest's.
  D9M_CUDA=OFF d9m_build build/asan -DCMAKE_BUILD_TYPE=Debug -DD9M_TESTS=ON -DD9M_CERTIFY_TRIALS=3 \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" > /dev/null
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -j "$(nproc)" --output-on-failure -L 'unit|cpu' -E 'chromium'
  echo "== TSan: the thread pool, the accumulate engines, the threaded digest"
  # Only the unit tests run under TSan: build nothing else.
  D9M_BUILD_TARGETS=d9m_unit_tests D9M_CUDA=OFF d9m_build build/tsan -DCMAKE_BUILD_TYPE=Debug -DD9M_TESTS=ON "-DCMAKE_CXX_FLAGS=-fsanitize=thread -O1" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" > /dev/null
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build/tsan -j "$(nproc)" --output-on-failure \
    -R '^(ThreadPool|KernelAgreement|DigestV1)\.'
  echo "== libFuzzer: the catalogue parser, the store opener and baselines (fixed crashes replayed, then 20 s each)"
  bash ci/fuzz.sh "${D9M_FUZZ_SECONDS:-20}"
fi
