#!/usr/bin/env bash
# ci/gpu-audit.sh's stage selection, on any machine (D9M_ALLOW_NO_GPU): a misspelt stage stops
# the job before anything runs (a lease must not come back green with nothing done), and no stage
# writes no store and no report, and exits 0. Its deadline (D9M_DEADLINE_S) stops a run in time
# for the reports.
#   gpu_audit_test.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: gpu_audit_test.sh BUILD_DIR}
script="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/ci/gpu-audit.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job() { D9M_BUILD_DIR=$build D9M_ALLOW_NO_GPU=1 bash "$script" "$tmp/$1" > "$tmp/$1.log" 2>&1; }

D9M_STAGES="tests library" job misspelt
rc=$?
((rc == 2)) || fail "an unknown stage: exit $rc, not 2 ($(tail -2 "$tmp/misspelt.log"))"
grep -q "unknown stage 'library'" "$tmp/misspelt.log" || fail "an unknown stage: $(tail -2 "$tmp/misspelt.log")"
[[ ! -e $tmp/misspelt/fingerprint.json ]] || fail "an unknown stage: the job started"

D9M_STAGES="" job none
rc=$?
((rc == 0)) || fail "no stage: exit $rc ($(tail -3 "$tmp/none.log"))"
grep -q "no store: no stage ran a case" "$tmp/none.log" || fail "no stage: $(tail -3 "$tmp/none.log")"
[[ ! -e $tmp/none/d9m.sqlite && ! -e $tmp/none/report.md ]] || fail "no stage: a store or report was written"
[[ -s $tmp/none/fingerprint.json ]] || fail "no stage: no fingerprint.json"

# The list is read as words, not through echo or the shell's globbing: an option-like or a glob
# name is an unknown stage, named as it was typed.
for bad in -n 'benc?' '*'; do
  D9M_STAGES="$bad" job odd
  rc=$?
  ((rc == 2)) || fail "D9M_STAGES='$bad': exit $rc, not 2 ($(tail -2 "$tmp/odd.log"))"
  grep -qF "unknown stage '$bad'" "$tmp/odd.log" || fail "D9M_STAGES='$bad': $(tail -2 "$tmp/odd.log")"
done

# Stage names may be separated by any whitespace.
D9M_STAGES=$'\n' job blank
rc=$?
((rc == 0)) || fail "a newline as the stage list: exit $rc ($(tail -3 "$tmp/blank.log"))"
D9M_STAGES=$'\n\tlibrary' job second_line
rc=$?
((rc == 2)) || fail "a misspelt name on a second line: exit $rc, not 2"

# A short lease audits a part of a stage: D9M_LIBRARY_OPS and D9M_MODELS_OPS select ops of the
# libraries stage and of the models profile, and nothing else is audited (the controls aside); a
# name outside the stage's ops stops the job before anything runs.
D9M_STAGES="libraries models" D9M_LIBRARY_OPS=spmv D9M_MODELS_OPS="layer_norm" D9M_LIBRARY_TRIALS=2 D9M_MODELS_TRIALS=2 job part
rc=$?
((rc == 0)) || fail "a part of the stages: exit $rc ($(tail -3 "$tmp/part.log"))"
python3 - "$tmp/part/report.json" << 'PY' || fail "a part of the stages: other ops were audited"
import json, sys
report = json.load(open(sys.argv[1]))
ops = {r["op"] for r in report["results"] if r["config"] != "_canary"}  # the controls
assert ops == {"spmv", "layer_norm"}, ops
PY
for bad in "D9M_LIBRARY_OPS=bias_add" "D9M_MODELS_OPS=spmv" "D9M_MODELS_OPS=no_such_op"; do
  (export "$bad"; D9M_STAGES="tests" job bad_ops)
  rc=$?
  ((rc == 2)) || fail "$bad: exit $rc, not 2 ($(tail -2 "$tmp/bad_ops.log"))"
  grep -q "${bad%%=*}: '${bad#*=}'" "$tmp/bad_ops.log" || grep -q "${bad%%=*}: .*'${bad#*=}'" "$tmp/bad_ops.log" ||
    fail "$bad: $(tail -2 "$tmp/bad_ops.log")"
  [[ ! -e $tmp/bad_ops/nvidia-smi.txt ]] || fail "$bad: the job started"
  rm -rf "$tmp/bad_ops"
done

# The models stage runs cuda.atomic at f16 and bf16 last, at D9M_MODELS_HALF_ATOMIC_TRIALS (an
# atomicAdd there is a CAS loop: minutes a trial at model shapes), every other case at
# D9M_MODELS_TRIALS, each case once; 0 leaves the 16-bit atomic cases out. (No GPU here: the CUDA
# cases are SKIPPED, but stored in the run that planned them. layer_norm_grad_beta: the op with
# both kinds of case and the fewest others, for the sanitized build's time.)
for half in 2 0; do
  D9M_STAGES="models" D9M_MODELS_OPS="layer_norm_grad_beta" D9M_MODELS_TRIALS=3 D9M_MODELS_HALF_ATOMIC_TRIALS=$half job "half$half"
  rc=$?
  ((rc == 0)) || fail "models with D9M_MODELS_HALF_ATOMIC_TRIALS=$half: exit $rc ($(tail -3 "$tmp/half$half.log"))"
  python3 - "$tmp/half$half/d9m.sqlite" "$half" "$build/harness/d9m" << 'PY' || fail "models with D9M_MODELS_HALF_ATOMIC_TRIALS=$half: the passes"
import sqlite3, subprocess, sys
db, half, d9m = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = sqlite3.connect(db).execute(
    "SELECT c.config, c.variant, r.trials_per_case, r.started_at, r.rowid FROM case_runs cr JOIN cases c ON c.id = cr.case_id"
    " JOIN runs r ON r.id = cr.run_id WHERE c.op = 'layer_norm_grad_beta' AND c.config != '_canary'").fetchall()
cases = [(c, v) for c, v, *_ in rows]
assert len(cases) == len(set(cases)), "a case ran twice"
listed = subprocess.run([d9m, "list", "--cases", "--profile", "models", "--backend", "cuda,torch", "--op", "layer_norm_grad_beta"],
                        capture_output=True, text=True, check=True).stdout.split()
planned = {tuple(x.split("/")[1:]) for x in listed if x.count("/") == 2}
half_cases = {(c, v) for c, v in planned if v == "cuda.atomic" and (c.endswith("_bf16") or c.endswith("_f16"))}
assert half_cases and planned - half_cases, "the profile lacks a 16-bit cuda.atomic case of layer_norm_grad_beta, or any other"
expect = planned if half else planned - half_cases
assert set(cases) == expect, (sorted(set(cases) ^ expect))[:6]
last_run = max(r[4] for r in rows)
for config, variant, trials, started, run in rows:
    if (config, variant) in half_cases:
        assert trials == half and run == last_run, (config, variant, trials, run, last_run)
    else:
        assert trials == 3 and (run != last_run or not half), (config, variant, trials)
PY
done

# A deadline stops the stage it reaches (the CPU run, far too long for it), keeps what that run
# finished (it ends as interrupted), starts no later stage, and still writes and verifies the
# reports: exit 124, and the log names what was stopped and what was not started.
D9M_STAGES="cpu models" D9M_CPU_TRIALS=1000000 D9M_DEADLINE_S=20 D9M_REPORT_RESERVE_S=12 job deadline
rc=$?
((rc == 124)) || fail "a deadline: exit $rc, not 124 ($(tail -3 "$tmp/deadline.log"))"
grep -q "deadline (20 s, 12 s kept for the reports): stopped after [0-9]* s: .*d9m run" "$tmp/deadline.log" ||
  fail "a deadline: the CPU run was not stopped by it ($(tail -5 "$tmp/deadline.log"))"
n=$(grep -c "deadline (20 s, 12 s kept for the reports): stopped after" "$tmp/deadline/log.txt")
((n == 1)) || fail "a deadline: log.txt records the stop $n times, not once"
grep -q "stage models not started" "$tmp/deadline.log" || fail "a deadline: the models stage was not left out"
grep -q "cut short by the deadline" "$tmp/deadline.log" || fail "a deadline: the last line does not say so"
[[ -s $tmp/deadline/report.md && -s $tmp/deadline/report.json ]] || fail "a deadline: no reports"
"$build/harness/d9m" verify --db "$tmp/deadline/d9m.sqlite" > /dev/null || fail "a deadline: the store does not verify"
python3 - "$tmp/deadline/report.json" << 'PY' || fail "a deadline: the run is not recorded as interrupted"
import json, sys
report = json.load(open(sys.argv[1]))
assert (report["runs"], report["interrupted_runs"]) == (1, 1), (report["runs"], report["interrupted_runs"])
PY
# A second call continues that store (D9M_CONTINUE): the same run goes on where the deadline
# stopped it, adding cases, and the earlier call's store is left as it was.
# The first call must be cut short with some cases stored: more trials a case where a machine
# finished the CPU run within the time, fewer where it stored none (a sanitized build).
cases() { "$build/harness/d9m" verify --db "$1" | sed -n 's/.*OK (1 runs, \([0-9]*\) cases.*/\1/p'; }
first=0
for trials in 2 20 200; do
  rm -rf "$tmp/first_call"
  D9M_STAGES="cpu" D9M_CPU_TRIALS=$trials D9M_DEADLINE_S=24 D9M_REPORT_RESERVE_S=12 job first_call
  [[ $? == 124 ]] || continue  # finished within the time
  first=$(cases "$tmp/first_call/d9m.sqlite")
  break
done
((first > 0)) || fail "continue: no first call was cut short with cases stored ($(tail -3 "$tmp/first_call.log"))"
sum_before=$(sha256sum < "$tmp/first_call/d9m.sqlite")
D9M_CONTINUE=$tmp/first_call/d9m.sqlite D9M_STAGES="cpu" D9M_CPU_TRIALS=$trials D9M_DEADLINE_S=24 D9M_REPORT_RESERVE_S=12 job second_call
grep -q "resumed run .* (resumption 1): $first cases were stored before" "$tmp/second_call.log" ||
  fail "continue: the second call did not resume the first call's run ($(grep 'd9m:' "$tmp/second_call.log" | head -3))"
second=$(cases "$tmp/second_call/d9m.sqlite")
((second > first)) || fail "continue: no case added ($first, then $second)"
[[ $(sha256sum < "$tmp/first_call/d9m.sqlite") == "$sum_before" ]] || fail "continue: the earlier call's store changed"
D9M_CONTINUE=$tmp/first_call/d9m.sqlite D9M_STAGES="" job second_call
rc=$?
((rc == 2)) || fail "continue into an OUT that holds a store: exit $rc, not 2"
D9M_CONTINUE=$tmp/no_such.sqlite D9M_STAGES="" job no_store
rc=$?
((rc == 2)) || fail "continue from a missing store: exit $rc, not 2"

# A store whose last cases are still in its write-ahead log (a call killed before its reports
# folded it in) is continued with them (found by review: they were left behind).
mkdir -p "$tmp/walsrc"
python3 - "$build/harness/d9m" "$tmp/walsrc/d9m.sqlite" << 'PY' || fail "continue with a log: cannot make a store whose run is in its log"
import shutil, sqlite3, subprocess, sys
d9m, db = sys.argv[1], sys.argv[2]
subprocess.run([d9m, "run", "--backend", "cpu", "--op", "bias_add", "-n", "2", "-q", "--no-canaries", "--db", db + ".seed"],
               check=True, capture_output=True)
shutil.copy(db + ".seed", db)
# While this connection stays open, the run's writes stay in the log (its close is not the last).
c = sqlite3.connect(db); c.execute("SELECT count(*) FROM runs").fetchone()
subprocess.run([d9m, "run", "--backend", "cpu", "--op", "bias_add_grad", "-n", "2", "-q", "--no-canaries", "--db", db],
               check=True, capture_output=True)
shutil.copy(db, db + ".copy"); shutil.copy(db + "-wal", db + ".copy-wal")
PY
D9M_CONTINUE=$tmp/walsrc/d9m.sqlite.copy D9M_STAGES="" job with_log
grep -q "with its write-ahead log" "$tmp/with_log.log" || fail "continue with a log: the log was not carried ($(tail -3 "$tmp/with_log.log"))"
"$build/harness/d9m" verify --db "$tmp/with_log/d9m.sqlite" | grep -q "OK (2 runs" ||
  fail "continue with a log: the run in the log is not in the copy ($("$build/harness/d9m" verify --db "$tmp/with_log/d9m.sqlite" | tail -1))"

# Not a number, or no time left after the reports: refused before anything runs. Leading zeros
# are decimal, not octal.
D9M_STAGES="" D9M_DEADLINE_S=9m job bad_deadline
rc=$?
((rc == 2)) || fail "D9M_DEADLINE_S=9m: exit $rc, not 2"
D9M_STAGES="" D9M_DEADLINE_S=50 job short_deadline
rc=$?
((rc == 2)) || fail "D9M_DEADLINE_S=50 with 60 s kept for the reports: exit $rc, not 2"
for bad in 0 1e3 60s; do
  D9M_STAGES="" D9M_MODELS_TIMEOUT_S=$bad job bad_timeout
  rc=$?
  ((rc == 2)) || fail "D9M_MODELS_TIMEOUT_S=$bad: exit $rc, not 2"
  rm -rf "$tmp/bad_timeout"
done
D9M_STAGES="" D9M_DEADLINE_S=0540 job octal_deadline
rc=$?
((rc == 0)) || fail "D9M_DEADLINE_S=0540: exit $rc, not 0 ($(tail -2 "$tmp/octal_deadline.log"))"
echo "gpu-audit.sh stages: ok"
