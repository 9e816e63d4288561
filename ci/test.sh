#!/usr/bin/env bash
# Runs d9m's tests on a fresh machine: installs what is missing (as root), configures, builds,
# and runs ctest: unit tests, CLI tests, and one certification test per catalogued case of the
# quick profile (the GPU ones only where there is a GPU). Then the threaded code under
# ThreadSanitizer and the libFuzzer targets for a short budget (ci/fuzz.sh). Extra arguments go
# to the ctest.
#
# One build does all but ThreadSanitizer's part (which cannot share a process with ASan): every
# C++ file is compiled by clang with AddressSanitizer and UndefinedBehaviorSanitizer (the harness
# also with libFuzzer's coverage, -fsanitize=fuzzer-no-link, which only counts edges until a
# fuzzer links it), and every .cu file by nvcc (compiled and linked; the GPU tests skip without a
# device). So every test runs sanitized, and the fuzz targets come from the same tree. At -O0,
# which halves the compile time under the sanitizers (the .cu files' host code too: here it only
# finds that there is no device), but the kernels at -O1, where the tests spend their time. Before (a release build and its tests, then separate ASan and fuzz builds)
# this took about 45 minutes on a fresh clone on 2 cores. D9M_SANITIZE=0: an optimised GCC
# build without sanitizers whose catalogue-wide unit tests run the default profile, and neither
# TSan nor fuzzing (for when a sanitizer is not the question).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Each stage's start, with the minutes spent so far: the log says where CI's time goes.
stage() { echo "== [$((SECONDS / 60)) min $((SECONDS % 60)) s] $*"; }
source ci/deps.sh
d9m_install_deps
build=${D9M_BUILD_DIR:-build/test}
sanitize=${D9M_SANITIZE:-1}
stage "build ($build)"
# The certification tests certify the quick profile (DESIGN.md: what CI certifies on every
# change), and so do the sanitized catalogue-wide unit tests: every op and variant run is what
# finds memory errors, and every config of the default one costs ten times as much under the
# sanitizers (the GPU job, ci/gpu-audit.sh, runs them on the default profile). Benchmarks are
# built, so they cannot rot. No full debug info (a quarter of the compile time): line tables are
# enough for the sanitizers' stack traces. lld links the dozen sanitized executables (7.5 s for
# d9m_unit_tests with ld.bfd, 1.4 s with lld, measured). The harness libraries as unity builds
# (D9M_UNITY: 164 core-seconds instead of 314, measured).
if [[ $sanitize == 1 ]]; then
  CC=clang CXX=clang++ d9m_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only" -DD9M_KERNEL_CXX_FLAGS=-O1 "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=-O0" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined -fuse-ld=lld" \
    -DD9M_TESTS=ON -DD9M_BENCH=ON -DD9M_FUZZ=ON -DD9M_CERTIFY_PROFILE=quick -DD9M_TEST_PROFILE=quick -DD9M_UNITY=ON
else
  d9m_build "$build" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DD9M_TESTS=ON -DD9M_BENCH=ON \
    -DD9M_CERTIFY_PROFILE=quick
fi
stage "tests"
# Without a GPU every gpu-labelled test (GPU unit tests, and a certification test per GPU case:
# most of the catalogue's cases) would only report a skip, at about half a second each; they are
# built all the same, and ci/gpu-audit.sh runs them where there is a device.
gpu_tests=()
if ! { command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; }; then
  gpu_tests=(-LE gpu)
  stage "no GPU here: the gpu-labelled tests ($(ctest --test-dir "$build" -N -L gpu | grep -c 'Test *#')) are left to ci/gpu-audit.sh"
fi
# The CUDA runtime maps memory where ASan's shadow gap would be; leaks are looked for. A third of
# the kill test's 50 rounds (16, four of them killing the resume too): each d9m process costs
# several times more under the sanitizers, and the test was the longest of the suite (112 s of
# 25 rounds on 2 cores), where CI must stay well under 30 minutes.
kill_rounds=50
[[ $sanitize == 1 ]] && kill_rounds=16
D9M_KILL_ROUNDS=${D9M_KILL_ROUNDS:-$kill_rounds} ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "${gpu_tests[@]}" "$@"

if [[ $sanitize == 1 ]]; then
  stage "TSan: the thread pool, the threaded digest, the CPU variants on several thread counts (quick profile)"
  # Only the threaded code's tests (d9m_thread_tests: kernels and harness core) run under TSan.
  # Without precompiled headers: this build is what keeps every file's own #includes honest.
  # Line tables only (-g1), as in the build above: 157 s against 216 s with -g (302 and 385
  # core-s, measured one after the other), and TSan's reports still name file and line.
  D9M_BUILD_TARGETS=d9m_thread_tests D9M_CUDA=OFF d9m_build build/tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DD9M_TESTS=ON -DD9M_TEST_PROFILE=quick \
    -DD9M_PCH=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=thread -O1" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" > /dev/null
  # In two processes side by side: the longest test (64 s of the 120 under TSan, measured) in
  # one, the rest in the other. A renamed test only loses the overlap: the second takes the rest.
  tsan() { TSAN_OPTIONS=halt_on_error=1 D9M_SOURCE_DIR=$PWD build/tsan/suites/d9m_thread_tests --gtest_brief=1 "$@"; }
  longest='KernelAgreement.OpsAtEveryPrecision*'
  tsan --gtest_filter="$longest" > build/tsan/longest.log 2>&1 &
  longest_pid=$!
  rest=0 && tsan --gtest_filter="-$longest" || rest=$?
  longest_rc=0 && wait "$longest_pid" || longest_rc=$?
  cat build/tsan/longest.log
  ((rest == 0 && longest_rc == 0)) || { echo "TSan: the thread tests failed (exit $rest, $longest_rc)"; exit 1; }
  stage "libFuzzer: the catalogue parser, the store opener, baselines, attestations and merge (fixed crashes replayed, then 15 s each)"
  D9M_FUZZ_BUILD_DIR=$build bash ci/fuzz.sh "${D9M_FUZZ_SECONDS:-15}"
fi
stage "done"
