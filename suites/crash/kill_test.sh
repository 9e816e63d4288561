#!/usr/bin/env bash
# Crash safety and --resume (issue 5): SIGKILL a run at random moments (D9M_KILL_ROUNDS, default
# 50 that hit a run in progress), spread over the whole run, and every fourth time kill the resume
# too. After each kill the store must pass SQLite's integrity check and show the run interrupted;
# `d9m run --resume` with the same arguments must complete that same run (no second run), pass
# `d9m verify`, and give exactly the cases, trial counts, digests and batch-invariance results of an uninterrupted run
# (statuses too, except those of atomic and autotune variants, which race or follow the timing by design).
# Usage: kill_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
ROUNDS=${D9M_KILL_ROUNDS:-50}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# A catalogue of its own (suites/crash/catalog.json): the default one grows with every family,
# and this test reruns a whole run for each of its rounds.
ARGS=(run --backend cpu -n 4 --threads 2 -q --catalog "$(cd "$(dirname "$0")" && pwd)/catalog.json")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The reference: an uninterrupted run.
"$D9M" "${ARGS[@]}" --db "$T/ref.sqlite" 2> "$T/err" || { cat "$T/err"; echo "FAIL: the reference run"; exit 1; }
"$D9M" report --db "$T/ref.sqlite" --format json -o "$T/ref.json" || exit 1
CASES=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from case_runs').fetchone()[0])" "$T/ref.sqlite")
echo "a run stores $CASES cases; each kill lands while a random one of them runs or is being stored"

# kill_at DB [--resume]: starts a run and SIGKILLs it at a random moment of its progress: once
# the store holds k cases (k uniform in [-1, CASES), -1 meaning at once), after a further random 0-3 ms, so that kills
# fall into set-up, trials and the store's transactions alike. Moments are drawn by progress, not
# by time, so machine load cannot push them past the end of the run.
kill_at() {
  local db=$1
  shift
  python3 - "$D9M" "$db" "$CASES" "$T/log" "${ARGS[@]}" "$@" << 'PY'
import random, sqlite3, subprocess, sys, time
d9m, db, cases, log, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
k, jitter = random.randrange(-1, cases), random.uniform(0, 0.003)  # k = -1: during start-up
def stored():
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.01)
        n = c.execute("select count(*) from case_runs").fetchone()[0]
        c.close()
        return n
    except sqlite3.Error:
        return -1  # not created yet, or momentarily busy
with open(log, "a") as err:
    p = subprocess.Popen([d9m, *args, "--db", db], stdout=subprocess.DEVNULL, stderr=err)
    while p.poll() is None and stored() < k:
        time.sleep(0.001)
    time.sleep(jitter)
    p.kill()
    p.wait()
PY
}

# check_after_kill DB WHAT: integrity, and no run that looks alive. Sets STATE: none (killed
# before the run was recorded), complete, pending (to resume), or error (a check failed). One
# Python for all the store's checks: each start of it (and of sqlite3) costs more than some of
# d9m's commands.
check_after_kill() {
  local db=$1 what=$2
  STATE=none
  [[ -e $db ]] || return 0  # killed before the store existed: nothing to check
  # d9m reads a run whose process is gone as interrupted; after a complete run there is none.
  "$D9M" report --db "$db" --format json -o "$T/k.json" 2> "$T/err" || [[ $? == 1 ]] || { cat "$T/err"; fail "$what: report after SIGKILL"; }
  python3 - "$db" "$T/k.json" > "$T/state" <<'PY' || fail "$what: the store after SIGKILL"
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
ok = c.execute("PRAGMA integrity_check").fetchall()
assert ok == [("ok",)], ok
states = [s for (s,) in c.execute("select state from runs")]
assert len(states) <= 1, states
# a run the kill cut short reads as interrupted, though nothing could write that down
if states and states != ["complete"]:
    r = json.load(open(sys.argv[2]))
    assert r["interrupted_runs"] == 1, (states, r["interrupted_runs"])
print("none" if not states else "complete" if states == ["complete"] else "pending")
PY
  STATE=$(< "$T/state")
  [[ -n $STATE ]] || STATE=error  # the checks failed (counted above): nothing to resume
  "$D9M" verify --db "$db" > "$T/v" 2>&1 || { cat "$T/v"; fail "$what: verify after SIGKILL"; }
  if [[ $STATE == pending ]]; then
    grep -q "interrupted" "$T/v" || { cat "$T/v"; fail "$what: verify does not call the dead run interrupted"; }
  fi
}

compare_with_reference() {
  local db=$1 what=$2
  "$D9M" report --db "$db" --format json -o "$T/r.json" 2> "$T/err" || [[ $? == 1 ]] || { cat "$T/err"; fail "$what: report"; return; }
  python3 - "$T/ref.json" "$T/r.json" "$db" <<'PY' || fail "$what: the resumed run differs from an uninterrupted one"
import json, sqlite3, sys
ref, got = (json.load(open(p)) for p in sys.argv[1:3])
db = sqlite3.connect(sys.argv[3])
runs = db.execute("select state from runs").fetchall()
assert runs == [("complete",)], f"runs: {runs}"
key = lambda r: (r["op"], r["config"], r["variant"])
a = {key(r): r for r in ref["results"]}
b = {key(r): r for r in got["results"]}
assert a.keys() == b.keys(), f"cases differ: {sorted(set(a) ^ set(b))[:5]}"
assert any(r.get("invariance") for r in ref["results"]), "the reference holds no batch-invariance evidence to compare"
for k in a:
    assert b[k]["trials"] == a[k]["trials"], (k, b[k]["trials"], a[k]["trials"])
    if a[k]["role"] not in ("atomic", "autotune"):  # these race, or follow the timing, by design
        assert (b[k]["status"], b[k]["digest"]) == (a[k]["status"], a[k]["digest"]), (k, b[k]["status"], a[k]["status"])
        # batch-invariance evidence survives the kill too: stored once, with the case
        assert b[k].get("invariance") == a[k].get("invariance"), (k, b[k].get("invariance"), a[k].get("invariance"))
# one trial row per trial, no case twice
dup = db.execute("select count(*) from (select case_id from case_runs group by run_id, case_id having count(*) > 1)").fetchone()[0]
assert dup == 0
PY
}

# Rounds go on until ROUNDS kills have hit a run in progress (a kill that came just after the
# last case does not count), at most 3 x ROUNDS rounds.
hits=0 early=0 finished=0 round=0
while ((hits < ROUNDS && round < 3 * ROUNDS)); do
  round=$((round + 1))
  db=$T/s$round.sqlite
  kill_at "$db"
  check_after_kill "$db" "round $round"
  case $STATE in
    complete)
      finished=$((finished + 1))
      compare_with_reference "$db" "round $round (not interrupted)"
      rm -f "$db" "$db"-*
      continue
      ;;
    error)
      rm -f "$db" "$db"-*
      continue
      ;;
    none) early=$((early + 1)) ;;
    pending)
      hits=$((hits + 1))
      if ((hits % 4 == 0)); then  # kill the resume as well
        kill_at "$db" --resume
        check_after_kill "$db" "round $round (resume killed)"
      fi
      ;;
  esac
  if [[ $STATE != complete ]]; then
    "$D9M" "${ARGS[@]}" --resume --db "$db" > /dev/null 2> "$T/err" || { cat "$T/err"; fail "round $round: --resume"; continue; }
  fi
  "$D9M" verify --db "$db" > "$T/v" 2>&1 || { cat "$T/v"; fail "round $round: verify after resume"; }
  compare_with_reference "$db" "round $round"
  rm -f "$db" "$db"-*
done
echo "$round rounds: $hits kills hit a run in progress and were resumed, $early came before the run was recorded, $finished after it had ended; $failures failures"
((hits >= ROUNDS)) || fail "only $hits kills in $round rounds hit a run in progress"
exit $((failures > 0))
