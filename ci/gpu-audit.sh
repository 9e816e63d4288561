#!/usr/bin/env bash
# The whole GPU job, for a machine with an NVIDIA GPU, in stages: the GPU tests (with
# compute-sanitizer, the unit tests and fault isolation); the audit of the vendor-library families
# at D9M_LIBRARY_TRIALS and of every other GPU case at D9M_GPU_TRIALS, with PyTorch's kernels, and
# the pipelines; the CPU cases of the same catalogue (D9M_CPU_TRIALS) into the same store, so that
# cross-implementation equality can be read from it; the GPU and PyTorch cases of the models
# profile (the layer shapes of real networks); the PyTorch hook; the benchmarks and the peer comparison; then
# the reports. Everything goes under OUT (first argument, or $OUT, or out/gpu-audit):
# d9m.sqlite, report.md, report.json, trace-diff.md, trace-diff-100-steps.md and .html,
# fingerprint.json, nvidia-smi.txt, bench.json, log.txt.
#
#   ci/gpu-audit.sh [OUT]
#   D9M_BUILD_DIR=build/gpu   a CUDA build to use (built with ci/deps.sh when missing), or a
#                             bundle of one made by ci/gpu-bundle.sh for a machine without apt
#
#   D9M_STAGES="tests libraries others pipelines long_pipeline cpu models hook bench peer"
#                             the stages to run (default
#                             all, in this order; an unknown name stops the job; the reports are
#                             written wherever a stage made a store): a lease too short for the whole
#                             job runs it as several calls, each with its own OUT and store (d9m merge
#                             combines stores)
#   D9M_GPU_TRIALS=200, D9M_CPU_TRIALS=20
#   D9M_LIBRARY_TRIALS=1000   trials per case for the vendor-library families (cuBLAS/cuBLASLt
#                             GEMM, cuDNN forward convolution and attention, CUB, cuSPARSE, and
#                             sparse_dense_matmul, which has cuSPARSE's SpMM variants)
#   D9M_LIBRARY_OPS, D9M_MODELS_OPS="op ..."   only these ops in the libraries stage (of its
#                             families) and in the models stage (of the profile's ops): a short lease
#                             audits what an earlier one did not; a name outside the stage's ops
#                             stops the job before anything runs
#   D9M_SANITIZERS="memcheck racecheck"   compute-sanitizer tools the GPU tests run under ("": none)
#   D9M_MODELS_TRIALS=20, D9M_MODELS_ORDERED_TRIALS=2   the models profile's trials (0 skips it), and
#                             those of the conv backprops' sort-based cuda.ordered (seconds a trial)
#   D9M_MODELS_HALF_ATOMIC_TRIALS=2   those of cuda.atomic at f16 and bf16, run after every other
#                             models case (at 16 bits an atomicAdd is a CAS loop on sm_90: minutes a
#                             trial at these shapes; 0 leaves them out)
#   D9M_MODELS_TIMEOUT_S=60   the models stage's watchdog (d9m run --timeout): a case whose trial takes
#                             longer is stopped and is an ERROR that says so, instead of holding the
#                             lease (an H200, 2026-11-28: bf16 atomicAdd of a ResNet-50 bias gradient,
#                             400k adds onto each of 64 addresses, used the stage's 238 s on one case)
#   D9M_PIPELINE_TRIALS=20    trials per pipeline (stage pipelines) (a bf16 CNN step with cuDNN and cuBLAS took 5 s on an H200,
#                             searching at every step; it now searches at the first step of a trial)
#   D9M_LONG_PIPELINE_STEPS=100  the cnn pipeline's GPU settings again at this many steps a trial (0: not),
#                             at D9M_PIPELINE_TRIALS (stage long_pipeline): how a race's difference
#                             grows over a training run
#   D9M_DEADLINE_S=0          seconds from the job's start by which its stages must have ended (0: no
#                             limit), D9M_REPORT_RESERVE_S=60 of them kept for the reports: set it below
#                             the lease's call limit, so that the limit never kills the job before its
#                             reports and checkpoint. Every test binary and run gets only the time left
#                             (`timeout`, SIGTERM): a d9m run stopped so ends its run as interrupted,
#                             with every case it finished kept (`d9m run --resume` continues it); a stage
#                             reached with no time left is not started. The log names each.
#   D9M_CONTINUE=FILE         a store an earlier call of this job wrote (d9m.sqlite, with its -wal
#                             beside it where that call ended before folding it in, or the .xz of
#                             D9M_XZ_STORE; carried back with the working tree; a relative path is from
#                             the repository root, as OUT's is): copied to OUT first,
#                             and every run is `d9m run --resume`, so a run that call's deadline stopped
#                             goes on where it stopped, on the same stack (the same run id and hash
#                             chain, only its missing cases), and any other starts anew beside it.
#
# The exit code is the first nonzero one of the GPU tests, the unit tests, the GPU runs, the CPU
# run, the report's verdict (1: a claim was broken) and the store's verification; else 124 when
# the deadline cut the job short.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-${OUT:-out/gpu-audit}}
build=${D9M_BUILD_DIR:-build/gpu}
gpu_trials=${D9M_GPU_TRIALS:-200}
library_trials=${D9M_LIBRARY_TRIALS:-1000}
cpu_trials=${D9M_CPU_TRIALS:-20}
pipeline_trials=${D9M_PIPELINE_TRIALS:-20}
long_steps=${D9M_LONG_PIPELINE_STEPS:-100}
[[ $long_steps =~ ^[0-9]+$ ]] || { echo "gpu-audit: D9M_LONG_PIPELINE_STEPS must be a number of steps (0: none), not '$long_steps'" >&2; exit 2; }
deadline=${D9M_DEADLINE_S:-0}
reserve=${D9M_REPORT_RESERVE_S:-60}
for v in deadline reserve; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gpu-audit: D9M_DEADLINE_S and D9M_REPORT_RESERVE_S are whole seconds, not '${!v}'" >&2; exit 2; }
done
[[ ${D9M_MODELS_TIMEOUT_S:-60} =~ ^[0-9]+([.][0-9]+)?$ ]] && [[ ! ${D9M_MODELS_TIMEOUT_S:-60} =~ ^0*[.]?0*$ ]] ||
  { echo "gpu-audit: D9M_MODELS_TIMEOUT_S is a positive number of seconds, not '${D9M_MODELS_TIMEOUT_S}'" >&2; exit 2; }
deadline=$((10#$deadline)) reserve=$((10#$reserve))  # "0540" is 540 s, not octal
if ((deadline > 0 && deadline < reserve + 5)); then
  echo "gpu-audit: D9M_DEADLINE_S=$deadline leaves no time for any stage after the $reserve s kept for the reports" >&2
  exit 2
fi
continue_from=${D9M_CONTINUE:-}
resume=()
if [[ -n $continue_from ]]; then
  [[ -f $continue_from ]] || { echo "gpu-audit: D9M_CONTINUE: no such store: '$continue_from'" >&2; exit 2; }
  continue_from=$(realpath "$continue_from")
  resume=(--resume)
fi
all_stages="tests libraries others pipelines long_pipeline cpu models hook bench peer"
read -d "" -ra stage_list <<< "${D9M_STAGES-$all_stages}"  # any whitespace between names; no globbing, no echo options
stages=" ${stage_list[*]} "
for s in "${stage_list[@]}"; do
  [[ " $all_stages " == *" $s "* ]] || { echo "gpu-audit: unknown stage '$s' in D9M_STAGES (stages: $all_stages)" >&2; exit 2; }
done
# The vendor-library families (the libraries stage), and the ones a call audits (D9M_LIBRARY_OPS).
library_ops=(matmul matmul_batched symv conv2d sdpa sdpa_bwd reduce_sum cumsum segmented_reduce spmv spmm sparse_dense_matmul)
read -d "" -ra library_selection <<< "${D9M_LIBRARY_OPS-${library_ops[*]}}"
for op in "${library_selection[@]}"; do
  [[ " ${library_ops[*]} " == *" $op "* ]] || { echo "gpu-audit: D9M_LIBRARY_OPS: '$op' is not a vendor-library family (${library_ops[*]})" >&2; exit 2; }
done
read -d "" -ra models_selection <<< "${D9M_MODELS_OPS-}"
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: some steps run in folders of their own
if [[ -n $continue_from ]]; then
  # Never over another store (the earlier call's evidence is copied, never merged into one), nor
  # beside another store's log, which SQLite would apply to the copy.
  for f in d9m.sqlite d9m.sqlite-wal d9m.sqlite-shm; do
    [[ ! -e $out/$f ]] || { echo "gpu-audit: D9M_CONTINUE: $out/$f exists already" >&2; exit 2; }
  done
  [[ $continue_from != "$out/d9m.sqlite.xz" ]] || { echo "gpu-audit: D9M_CONTINUE: give a copy outside OUT" >&2; exit 2; }
fi
log=$out/log.txt
: > "$log"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }
# The earlier call's store into OUT, with its write-ahead log where it has one: a call stopped
# before its reports stage folded the log in keeps its newest cases there (found by review: they
# were left behind, and the stopped run could not be resumed).
copy_continued_store() {
  local from=$continue_from
  python3 -c "import lzma,shutil,sys
src = (lzma.open if sys.argv[1].endswith('.xz') else open)(sys.argv[1], 'rb')
with src, open(sys.argv[2], 'xb') as dst: shutil.copyfileobj(src, dst)" "$from" "$out/d9m.sqlite" ||
    { say "D9M_CONTINUE: could not copy $from"; rm -f "$out/d9m.sqlite"; exit 2; }
  local wal=""
  if [[ $from != *.xz && -s $from-wal ]]; then
    cp "$from-wal" "$out/d9m.sqlite-wal" || { say "D9M_CONTINUE: could not copy $from-wal"; rm -f "$out"/d9m.sqlite*; exit 2; }
    wal=", with its write-ahead log ($(stat -c %s "$from-wal") bytes)"
  fi
  say "continuing the store $from (sha256 $(sha256sum "$from" | cut -d' ' -f1))$wal: every run with --resume"
}

# The deadline: seconds left for the stages, and the commands run within it (as they are without
# a deadline). A command the deadline stopped (SIGTERM, then SIGKILL 30 s later), or did not start,
# exits 124 and leaves a mark: these run in pipelines, so in subshells, where no variable would
# reach the job's exit code. A command that died of another cause before its time keeps its own
# exit code (found by review: one killed by SIGKILL was taken for a deadline stop).
cut_marker=$(mktemp)
rm -f "$cut_marker"
trap 'rm -f "$cut_marker"' EXIT
seconds_left() { echo $((deadline - reserve - SECONDS)); }
# cut_short outside a pipeline (say writes the log); within_deadline runs inside one that tees
# into the log, so it only prints (found in the H200 log of 2026-11-28: every stop was logged twice).
cut_short() { say "deadline (${deadline} s, ${reserve} s kept for the reports): $*"; : > "$cut_marker"; }
cut_short_piped() { echo "== $(date -u +%H:%M:%S) deadline (${deadline} s, ${reserve} s kept for the reports): $*"; : > "$cut_marker"; }
within_deadline() {
  ((deadline > 0)) || { "$@"; return; }
  local left rc
  left=$(seconds_left)
  if ((left < 5)); then
    cut_short_piped "not started: ${*:1:3} ..."
    return 124
  fi
  local started=$SECONDS
  timeout --signal=TERM --kill-after=30 "$left" "$@"
  rc=$?
  if ((rc == 124 || rc == 137)) && ((SECONDS - started >= left)); then
    cut_short_piped "stopped after $left s: ${*:1:3} ..."
    return 124
  fi
  return "$rc"
}
stopped() { (($1 == 124)) && [[ -e $cut_marker ]]; }
# Whether a stage was asked for and, under a deadline, still has time to start.
stage() {
  [[ $stages == *" $1 "* ]] || return 1
  ((deadline == 0 || $(seconds_left) >= 5)) && return 0
  cut_short "stage $1 not started"
  return 1
}

# Fixtures the unit tests read (their compiled-in source path is the building machine's).
export D9M_SOURCE_DIR=$PWD
# A bundle made by ci/gpu-bundle.sh carries the shared libraries the GPU machine lacks.
[[ -d $build/lib ]] && export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# cuDNN, cuBLAS and cuSPARSE may live outside the loader's path (e.g. inside a Python
# environment's nvidia wheels). The copies the torch backend's Python ($D9M_PYTHON, else python3)
# loads come first, read from its own memory map after `import torch`: its workers inherit
# LD_LIBRARY_PATH, PyTorch refuses a cuDNN older than the one it was built with, and a machine
# can hold another cuDNN besides (the lent H200: 9.14 in /usr/lib, 9.19 in PyTorch's environment).
# Then the loader's own, then a search. (grep -c, not -q: under pipefail an early exit of grep can
# fail ldconfig with SIGPIPE.)
torch_libraries=$("${D9M_PYTHON:-python3}" - 2> /dev/null << 'PY'
import os
import torch
try:
    torch.backends.cudnn.version()  # loads cuDNN where PyTorch defers it
except Exception:
    pass
with open("/proc/self/maps") as maps:
    paths = {line.split()[-1] for line in maps if len(line.split()) >= 6}
for path in sorted(paths):
    if os.path.basename(path).startswith(("libcudnn.so", "libcublas", "libcusparse")):
        print(path)
PY
)
find_library_dir() {
  local name=$1 found
  found=$(awk -v n="$name" '{ k = split($0, part, "/"); if (part[k] == n) { print; exit } }' <<< "$torch_libraries")
  if [[ -z $found ]]; then
    ldconfig -p 2> /dev/null | grep -c "$name" > /dev/null && return 0
    found=$(find /opt /usr /root /home -name "$name" 2> /dev/null | head -n 1)
    [[ -n $found ]] || found=$(find / -xdev -name "$name" -not -path '/proc/*' 2> /dev/null | head -n 1)
  fi
  if [[ -n $found ]]; then
    export LD_LIBRARY_PATH=$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "$name: $found"
  fi
}
find_library_dir libcudnn.so.9
find_library_dir libcublas.so.13
find_library_dir libcublasLt.so.13
find_library_dir libcusparse.so.12

if [[ ! -x $build/harness/d9m ]]; then
  say "building d9m with CUDA into $build"
  source ci/deps.sh
  d9m_install_deps
  D9M_CUDA=ON d9m_build "$build" -DCMAKE_BUILD_TYPE=Release -DD9M_TESTS=ON -DD9M_BENCH=ON >> "$log" 2>&1 || { say "build failed"; exit 3; }
fi
d9m=$(realpath "$build/harness/d9m")
# D9M_MODELS_OPS: ops of the models profile, checked before anything runs.
if ((${#models_selection[@]} > 0)); then
  models_all=$("$d9m" list --cases --profile models --backend cuda,torch | cut -d' ' -f1 | cut -d/ -f1 | sort -u) ||
    { echo "gpu-audit: d9m list --profile models failed" >&2; exit 3; }
  for op in "${models_selection[@]}"; do
    grep -qxF -- "$op" <<< "$models_all" || { echo "gpu-audit: D9M_MODELS_OPS: the models profile has no GPU case of '$op' (it has: $(echo $models_all))" >&2; exit 2; }
  done
fi

say "machine"
{ nvidia-smi || echo "nvidia-smi not available"; } > "$out/nvidia-smi.txt" 2>&1
cat "$out/nvidia-smi.txt" >> "$log"
"$d9m" fingerprint --json > "$out/fingerprint.json" 2>> "$log"
cat "$out/fingerprint.json" >> "$log"

# This job exists to produce GPU evidence: without a GPU it stops here rather than "pass" with
# every GPU case skipped (D9M_ALLOW_NO_GPU=1 runs it anyway, to try the script).
if ! python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['fingerprint']['gpus'] else 1)" "$out/fingerprint.json"; then
  say "no GPU in the fingerprint: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['gpu_status'])" "$out/fingerprint.json")"
  [[ ${D9M_ALLOW_NO_GPU:-0} == 1 ]] || exit 3
fi
[[ -n $continue_from ]] && copy_continued_store

tests_rc=0 unit_rc=0 gpu_rc=0 cpu_rc=0 report_rc=0 verify_rc=0
if stage tests; then
  # The test binaries are run directly: a carried build folder's CTest files name the paths of
  # the machine that configured it.
  say "GPU tests"
  within_deadline "$build/suites/d9m_gpu_tests" 2>&1 | tee -a "$log"
  tests_rc=${PIPESTATUS[0]}
  stopped "$tests_rc" && tests_rc=0
  # The kernels under NVIDIA's sanitizers where the toolkit has them: out-of-bounds and misaligned
  # accesses (memcheck) and shared-memory races (racecheck) count as test failures.
  if command -v compute-sanitizer > /dev/null; then
    for tool in ${D9M_SANITIZERS-memcheck racecheck}; do
      say "GPU tests under compute-sanitizer --tool $tool"
      within_deadline compute-sanitizer --tool "$tool" --error-exitcode 1 "$build/suites/d9m_gpu_tests" --gtest_brief=1 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      ((rc == 0)) || stopped "$rc" || tests_rc=$rc
    done
  fi
  say "unit tests"
  within_deadline "$build/suites/d9m_unit_tests" --gtest_brief=1 2>&1 | tee -a "$log"
  unit_rc=${PIPESTATUS[0]}
  stopped "$unit_rc" && unit_rc=0
  if [[ -f $build/bindings/libd9m_device_digest.so ]]; then
    say "the PyTorch hook's device digest (libd9m_device_digest.so) against its host digest"
    within_deadline "${D9M_PYTHON:-python3}" suites/python/device_digest_check.py bindings/python "$build/bindings/libd9m_device_digest.so" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    ((rc == 0 || rc == 77)) || stopped "$rc" || tests_rc=$rc
  fi
  if [[ -x $build/suites/d9m_with_faults ]]; then
    say "isolation on the GPU: faults, the sticky CUDA error included, cost only their case"
    within_deadline bash suites/faults/fault_test.sh "$build/suites/d9m_with_faults" "$d9m" 2>&1 | tee -a "$log"
    faults_rc=${PIPESTATUS[0]}
    ((faults_rc == 0)) || stopped "$faults_rc" || tests_rc=$faults_rc
  fi
fi

# Runs d9m run into the store; the first nonzero exit code becomes gpu_rc (a 1, a broken claim,
# is not overwritten by a later run's code). A run the deadline stopped or never started is not a
# failure: cut_short says so.
audit() {
  within_deadline "$d9m" run "$@" "${resume[@]}" --db "$out/d9m.sqlite" -q 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  stopped "$rc" && return
  ((rc == 0 || gpu_rc != 0)) || gpu_rc=$rc
}
# The distinct values of one field (1: op, 3: variant) of `d9m list --cases` for the given
# selection, one per line, into the array named first; stops the job if d9m cannot list them or
# none is left after `filter` (an empty list would make the next option swallow the one after it).
list_field() {
  local -n into=$1
  local field=$2 filter=$3 listed
  shift 3
  listed=$("$d9m" list --cases "$@") && [[ -n $listed ]] || { say "d9m list --cases $* failed or listed nothing"; exit 3; }
  into=($(cut -d' ' -f1 <<< "$listed" | cut -d/ -f"$field" | sort -u | grep -vx -E "$filter"))
  ((${#into[@]} > 0)) || { say "d9m list --cases $*: nothing left but $filter"; exit 3; }
}
# The configs of the given ops' cuda.atomic cases in the models profile whose names match (keep
# = 1) or do not match (keep = 0) the extended regex, into the array named first; an empty list is
# an answer, d9m list failing stops the job.
atomic_configs() {
  local -n configs_into=$1
  local keep=$2 regex=$3 listed
  shift 3
  listed=$("$d9m" list --cases --profile models --backend cuda --op "$@") || { say "d9m list --cases --op $* failed"; exit 3; }
  configs_into=($(cut -d' ' -f1 <<< "$listed" | awk -F/ -v keep="$keep" -v re="$regex" \
                  '$3 == "cuda.atomic" && (($2 ~ re) == (keep == 1)) { print $2 }' | sort -u))
}
# The vendor-library families at D9M_LIBRARY_TRIALS, the other families at D9M_GPU_TRIALS and the
# pipelines at D9M_PIPELINE_TRIALS: disjoint sets, so every case has one run (the two controls
# excepted, which every run has). PyTorch's own CUDA kernels (torch.default, torch.deterministic)
# run in the same runs, so that they share the stack (its fingerprint names PyTorch's version) and
# sit beside d9m's and the vendors'.
if stage libraries && ((${#library_selection[@]} > 0)); then
  say "audit: vendor-library families (${library_selection[*]}), GPU backend and PyTorch's kernels, $library_trials trials per case"
  audit --backend cuda,torch -n "$library_trials" --op "${library_selection[@]}"
fi
if stage others; then
  list_field other_ops 1 "pipeline:.*|$(IFS='|'; echo "${library_ops[*]}")" --backend cuda,torch
  say "audit: the other families, GPU backend and PyTorch's kernels, $gpu_trials trials per case"
  audit --backend cuda,torch -n "$gpu_trials" --op "${other_ops[@]}"
fi
if stage pipelines; then
  say "audit: the pipelines' GPU settings, $pipeline_trials trials each"
  audit --backend cuda,torch -n "$pipeline_trials" --pipeline '*'
  # Where the GPU settings of the pipelines (the cnn training step) first diverged, from the run
  # above (the newest with traces): exit 1 means a source was found, which is evidence, not failure.
  say "trace diff: the GPU run's pipelines"
  "$d9m" trace diff --db "$out/d9m.sqlite" --format md -o "$out/trace-diff.md" 2>&1 | tee -a "$log"
fi
if ((long_steps > 0)) && stage long_pipeline; then
  # Issue 14's evidence: the CNN training step's GPU settings over a longer run (the atomic ones
  # diverge, the ordered one does not), and where each first diverged, with the chart.
  say "audit: the cnn pipeline's GPU settings at $long_steps steps, $pipeline_trials trials each"
  lines_before=$(wc -l < "$log")
  audit --backend cuda -n "$pipeline_trials" --pipeline cnn --steps "$long_steps"
  # That run by its id (its "d9m: run ID: N cases" line), never "the newest run with traces",
  # which may be the 5-step run of the pipelines stage where this one stored none.
  long_run=$(tail -n +"$((lines_before + 1))" "$log" | sed -n 's/^d9m: run \([0-9a-f]*\): .*/\1/p' | tail -1)
  if [[ -n $long_run ]]; then
    say "trace diff: the cnn pipeline at $long_steps steps (run $long_run)"
    for format in md html; do
      "$d9m" trace diff "$out/d9m.sqlite@run:$long_run" --format "$format" -o "$out/trace-diff-$long_steps-steps.$format" 2>&1 | tee -a "$log"
    done
  else
    say "the cnn pipeline at $long_steps steps stored no run: no trace diff"
  fi
fi
if stage cpu; then
  say "audit: CPU backend, $cpu_trials trials per case"
  within_deadline "$d9m" run --backend cpu -n "$cpu_trials" "${resume[@]}" --db "$out/d9m.sqlite" -q 2>&1 | tee -a "$log"
  cpu_rc=${PIPESTATUS[0]}
  stopped "$cpu_rc" && cpu_rc=0
fi
models_trials=${D9M_MODELS_TRIALS:-20}
models_ordered_trials=${D9M_MODELS_ORDERED_TRIALS:-2}
models_half_atomic_trials=${D9M_MODELS_HALF_ATOMIC_TRIALS:-2}
models_timeout=${D9M_MODELS_TIMEOUT_S:-60}
if stage models && ((models_trials > 0)); then
  # GPU and PyTorch cases only: the CPU variants at these shapes take minutes a trial (each
  # config's serial reference for the value check is computed once, on all cores where a variant
  # has its bits). The sort-based cuda.ordered variants of the convolution backprops get
  # D9M_MODELS_ORDERED_TRIALS: at ResNet-50's shapes they take up to 10 s a trial on an H200
  # (reports/h200-2026-11-26: their 140 trials took 366 of the 379 s of trials), where cuda.gather
  # gives the same bits in milliseconds.
  slow_ops=(conv2d_bwd_data conv2d_bwd_filter)
  if ((${#models_selection[@]} > 0)); then
    models_ops=() chosen_slow=()
    for op in "${models_selection[@]}"; do
      if [[ " ${slow_ops[*]} " == *" $op "* ]]; then chosen_slow+=("$op"); else models_ops+=("$op"); fi
    done
    slow_ops=("${chosen_slow[@]}")
  else
    list_field models_ops 1 "$(IFS='|'; echo "${slow_ops[*]}")" --profile models --backend cuda,torch
  fi
  say "audit: models profile (${models_selection[*]:-every op}), GPU backend and PyTorch's kernels, $models_trials trials per case (the conv backprops' cuda.ordered: $models_ordered_trials; cuda.atomic at 16 bits, last: $models_half_atomic_trials)"
  # cuda.atomic at f16 and bf16 goes last, at D9M_MODELS_HALF_ATOMIC_TRIALS: there an atomicAdd is
  # a compare-and-swap loop on sm_90 (docs/PERFORMANCE.md), and where many adds meet in one output
  # a trial takes minutes (reports/h200-2026-11-28: none finished in 238 s), which must not keep
  # the rest of the stage from a lease. The models profile names every 16-bit config NAME_f16 or
  # NAME_bf16 (make_models.py; catalog.models_generated holds the file to it).
  half_name='_b?f16$'
  wide_atomic() {  # wide_atomic OP...: cuda.atomic on the ops' f32 (and f64) configs, at $models_trials
    local wide_configs=()
    atomic_configs wide_configs 0 "$half_name" "$@"
    ((${#wide_configs[@]} == 0)) ||
      audit --profile models --timeout "$models_timeout" --backend cuda -n "$models_trials" --op "$@" --variant cuda.atomic --config "${wide_configs[@]}"
  }
  if ((${#models_ops[@]} > 0)); then
    list_field models_variants 3 'cuda[.]atomic' --profile models --backend cuda,torch --op "${models_ops[@]}"
    audit --profile models --timeout "$models_timeout" --backend cuda,torch -n "$models_trials" --op "${models_ops[@]}" --variant "${models_variants[@]}"
    wide_atomic "${models_ops[@]}"
  fi
  if ((${#slow_ops[@]} > 0)); then
    list_field slow_variants 3 'cuda[.](ordered|atomic)' --profile models --backend cuda,torch --op "${slow_ops[@]}"
    audit --profile models --timeout "$models_timeout" --backend cuda,torch -n "$models_trials" --op "${slow_ops[@]}" --variant "${slow_variants[@]}"
    wide_atomic "${slow_ops[@]}"
    if ((models_ordered_trials >= 2)); then
      audit --profile models --timeout "$models_timeout" --backend cuda -n "$models_ordered_trials" --op "${slow_ops[@]}" --variant cuda.ordered
    else
      say "the conv backprops' cuda.ordered left out (D9M_MODELS_ORDERED_TRIALS < 2)"
    fi
  fi
  half_ops=("${models_ops[@]}" "${slow_ops[@]}") half_configs=()
  ((${#half_ops[@]} == 0)) || atomic_configs half_configs 1 "$half_name" "${half_ops[@]}"
  if ((${#half_configs[@]} == 0)); then
    :
  elif ((models_half_atomic_trials >= 2)); then
    audit --profile models --timeout "$models_timeout" --backend cuda -n "$models_half_atomic_trials" --op "${half_ops[@]}" --variant cuda.atomic --config "${half_configs[@]}"
  else
    say "cuda.atomic at f16 and bf16 left out (D9M_MODELS_HALF_ATOMIC_TRIALS < 2)"
  fi
fi
if stage hook; then
  # The PyTorch hook on a real model's training steps (suites/python/model_step.py), PyTorch's
  # defaults and then use_deterministic_algorithms(True): which output and which op diverged.
  for mode in default deterministic; do
    say "PyTorch hook: model_step.py, $mode"
    mkdir -p "$out/hook-$mode"
    (cd "$out/hook-$mode" && within_deadline env D9M_TORCH_MODE="$mode" "$d9m" exec -n "${D9M_HOOK_TRIALS:-10}" --outputs weights.bin \
       --outputs inputs.bin --name "model_step_$mode" --db "$out/d9m.sqlite" -- python3 "$D9M_SOURCE_DIR/suites/python/model_step.py") 2>&1 | tee -a "$log"
    "$d9m" trace diff --db "$out/d9m.sqlite" --format md -o "$out/hook-$mode/trace-diff.md" 2>&1 | tee -a "$log"
    rm -f "$out/hook-$mode"/*.bin
  done
fi
if stage bench && [[ -x $build/bench/d9m_bench ]]; then
  say "GPU benchmarks (docs/PERFORMANCE.md)"
  # The start benchmarks time this d9m, not the path compiled into d9m_bench (the building machine's).
  export D9M_BENCH_EXE=$d9m
  within_deadline "$build/bench/d9m_bench" --benchmark_filter='Gpu|CpuCostOfDeterminism|DigestV1/bytes:268435456|MemoryRead/268435456|StoreInsertTrials|TrialOverhead|ProcessStart|RunOneCase' \
    --benchmark_out="$out/bench.json" --benchmark_out_format=json 2>&1 | tee -a "$log"
fi
if stage peer; then
  say "peer: d9m against a PyTorch loop on the GPU and a NumPy loop on the CPU (bench/peer)"
  within_deadline bash bench/peer/compare.sh "$d9m" "${D9M_PEER_TRIALS:-2000}" gpu 2>&1 | tee -a "$log"
  within_deadline bash bench/peer/compare.sh "$d9m" "${D9M_PEER_TRIALS:-2000}" cpu 2>&1 | tee -a "$log"
fi

# Only where a stage wrote a store: d9m report would create an empty one.
if [[ -f $out/d9m.sqlite ]]; then
  say "reports"
  # The report's verdict covers what no single run judges: claims between runs and between stacks
  # that differ only in PyTorch (a GPU variant's claim to a CPU variant's bits). Its exit code counts.
  "$d9m" report --db "$out/d9m.sqlite" --format md -o "$out/report.md" 2>&1 | tee -a "$log"
  report_rc=${PIPESTATUS[0]}
  "$d9m" report --db "$out/d9m.sqlite" --format json -o "$out/report.json" 2>&1 | tee -a "$log"
  "$d9m" verify --db "$out/d9m.sqlite" 2>&1 | tee -a "$log"
  verify_rc=${PIPESTATUS[0]}
  # A WAL store is only whole with its -wal file; fold it in so d9m.sqlite alone is the evidence.
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" \
    "$out/d9m.sqlite" 2>> "$log" || true
  rm -f "$out/d9m.sqlite-runlease"  # an empty lock file (run leases), not evidence; every run has ended
  say "store sha256: $(sha256sum "$out/d9m.sqlite" | cut -d' ' -f1)"
  # A long audit's store outgrows what some transports carry (D9M_XZ_STORE=1: d9m.sqlite.xz instead,
  # lossless; xz -d gives back the very bytes whose SHA-256 is logged above).
  if [[ ${D9M_XZ_STORE:-0} == 1 ]]; then
    python3 -c "import lzma,shutil,sys
with open(sys.argv[1], 'rb') as src, lzma.open(sys.argv[1] + '.xz', 'wb', preset=9) as dst: shutil.copyfileobj(src, dst)" \
      "$out/d9m.sqlite" && rm "$out/d9m.sqlite"
  fi
else
  say "no store: no stage ran a case"
fi
cut=""
[[ -e $cut_marker ]] && cut=", cut short by the deadline"
say "done: gpu tests $tests_rc, unit tests $unit_rc, gpu audit $gpu_rc, cpu audit $cpu_rc, report $report_rc, verify $verify_rc$cut"
for rc in $tests_rc $unit_rc $gpu_rc $cpu_rc $report_rc $verify_rc; do
  ((rc != 0)) && exit "$rc"
done
[[ -n $cut ]] && exit 124
exit 0
