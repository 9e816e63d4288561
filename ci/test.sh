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
# Optimised, without debug info: -g costs a quarter of the compile time, and CI reads no core
# dumps (the sanitizer builds below keep it, for their stack traces). Benchmarks are built, so
# they cannot rot.
# The certification tests certify the quick profile (DESIGN.md: what CI certifies on every
# change); the catalogue-wide unit tests still run every config of the default one.
d9m_build "$build" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DD9M_TESTS=ON -DD9M_BENCH=ON \
  -DD9M_CERTIFY_PROFILE=quick
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
  echo "== ASan + UBSan: unit, CLI and CPU certification suites (quick profile)"
  # The sanitizers look for memory errors and undefined behaviour, which every op and variant run
  # once shows as well as the whole catalogue at twenty trials: the quick profile at three trials,
  # and a quarter of the kill test's rounds. The statistics are the first ctest's.
  D9M_CUDA=OFF d9m_build build/asan -DCMAKE_BUILD_TYPE=Debug -DD9M_TESTS=ON -DD9M_CERTIFY_TRIALS=3 -DD9M_CERTIFY_PROFILE=quick -DD9M_TEST_PROFILE=quick \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" > /dev/null
  D9M_KILL_ROUNDS=12 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -j "$(nproc)" --output-on-failure -L 'unit|cpu' -E 'chromium'
  echo "== TSan: the thread pool, the threaded digest, the CPU variants on several thread counts (quick profile)"
  # Only the threaded code's tests (d9m_thread_tests: kernels and harness core) run under TSan.
  D9M_BUILD_TARGETS=d9m_thread_tests D9M_CUDA=OFF d9m_build build/tsan -DCMAKE_BUILD_TYPE=Debug -DD9M_TESTS=ON -DD9M_TEST_PROFILE=quick \
    "-DCMAKE_CXX_FLAGS=-fsanitize=thread -O1" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" > /dev/null
  TSAN_OPTIONS=halt_on_error=1 D9M_SOURCE_DIR=$PWD build/tsan/suites/d9m_thread_tests --gtest_brief=1
  echo "== libFuzzer: the catalogue parser, the store opener and baselines (fixed crashes replayed, then 20 s each)"
  D9M_FUZZ_SEED_D9M=$build/harness/d9m bash ci/fuzz.sh "${D9M_FUZZ_SECONDS:-20}"
fi
