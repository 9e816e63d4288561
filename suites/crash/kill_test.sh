#!/usr/bin/env bash
# Crash safety and --resume (issue 5): SIGKILL a run at random moments (D9M_KILL_ROUNDS, default
# 50), spread over the whole length of an uninterrupted run, and every few rounds kill the resume
# too. After each kill the store must pass SQLite's integrity check and show the run interrupted;
# `d9m run --resume` with the same arguments must complete that same run (no second run), pass
# `d9m verify`, and give exactly the cases, trial counts and digests of an uninterrupted run
# (statuses too, except cpu.atomic's, which race by design).
# Usage: kill_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
ROUNDS=${D9M_KILL_ROUNDS:-50}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ARGS=(run --backend cpu -n 4 --threads 2 -q)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The reference, and how long a whole run takes here (sanitizer builds are slower).
start=$(date +%s%N)
"$D9M" "${ARGS[@]}" --db "$T/ref.sqlite" 2> "$T/err" || { cat "$T/err"; echo "FAIL: the reference run"; exit 1; }
span_us=$((($(date +%s%N) - start) / 1000))
"$D9M" report --db "$T/ref.sqlite" --format json -o "$T/ref.json" || exit 1
echo "an uninterrupted run takes $((span_us / 1000)) ms; killing at random moments within 110% of that"

# kill_at DB MICROSECONDS [--resume]: starts a run and SIGKILLs it after the delay (or lets it end).
kill_at() {
  local db=$1 us=$2
  shift 2
  "$D9M" "${ARGS[@]}" "$@" --db "$db" 2>> "$T/log" &
  local pid=$!
  sleep "$(printf '%d.%06d' $((us / 1000000)) $((us % 1000000)))"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
}

# check_interrupted DB: integrity, and no run that looks alive.
check_after_kill() {
  local db=$1 what=$2
  [[ -e $db ]] || return 0  # killed before the store existed: nothing to check
  python3 - "$db" <<'PY' || fail "$what: the store after SIGKILL"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
ok = c.execute("PRAGMA integrity_check").fetchall()
assert ok == [("ok",)], ok
PY
  # d9m reads a run whose process is gone as interrupted; after a complete run there is none.
  "$D9M" report --db "$db" --format json -o "$T/k.json" 2> "$T/err" || [[ $? == 1 ]] || { cat "$T/err"; fail "$what: report after SIGKILL"; }
  python3 - "$T/k.json" <<'PY' || fail "$what: run state after SIGKILL"
import json, sys
r = json.load(open(sys.argv[1]))
# every run is either complete or reads as interrupted: none may look as if it were still going
assert r["runs"] <= 1, r["runs"]
PY
  "$D9M" verify --db "$db" > "$T/v" 2>&1 || { cat "$T/v"; fail "$what: verify after SIGKILL"; }
  if [[ $(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"select count(*) from runs where state!='complete'\").fetchone()[0])" "$db") != 0 ]]; then
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
for k in a:
    assert b[k]["trials"] == a[k]["trials"], (k, b[k]["trials"], a[k]["trials"])
    if k[2] != "cpu.atomic":
        assert (b[k]["status"], b[k]["digest"]) == (a[k]["status"], a[k]["digest"]), (k, b[k]["status"], a[k]["status"])
# one trial row per trial, no case twice
dup = db.execute("select count(*) from (select case_id from case_runs group by run_id, case_id having count(*) > 1)").fetchone()[0]
assert dup == 0
PY
}

resumed=0 fresh=0 finished=0
for ((i = 1; i <= ROUNDS; i++)); do
  db=$T/s$i.sqlite
  us=$(((RANDOM * 32768 + RANDOM) % (span_us * 11 / 10 + 1)))
  kill_at "$db" "$us"
  check_after_kill "$db" "round $i (killed at ${us} us)"
  if ((i % 5 == 0)) && [[ -e $db ]]; then  # kill the resume as well
    us2=$(((RANDOM * 32768 + RANDOM) % (span_us + 1)))
    kill_at "$db" "$us2" --resume
    check_after_kill "$db" "round $i (resume killed at ${us2} us)"
  fi
  if [[ -e $db ]] && python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); sys.exit(c.execute(\"select count(*) from runs where state='complete'\").fetchone()[0] != 1)" "$db"; then
    finished=$((finished + 1))  # killed after the run had ended: nothing to resume
  else
    "$D9M" "${ARGS[@]}" --resume --db "$db" > /dev/null 2> "$T/err" || { cat "$T/err"; fail "round $i: --resume"; continue; }
    if grep -q "resumed run" "$T/err"; then resumed=$((resumed + 1)); else fresh=$((fresh + 1)); fi
  fi
  "$D9M" verify --db "$db" > "$T/v" 2>&1 || { cat "$T/v"; fail "round $i: verify after resume"; }
  compare_with_reference "$db" "round $i"
  rm -f "$db" "$db"-*
done
echo "$ROUNDS kills: $resumed runs resumed, $fresh started afresh (killed before the run began), $finished had ended; $failures failures"
((resumed >= ROUNDS / 2)) || fail "only $resumed of $ROUNDS kills hit a run in progress: the moments are not spread over the run"
exit $((failures > 0))
