#!/usr/bin/env bash
# Concurrency (issue 5): eight processes write one store at once (the first creating it), while
# readers render reports from it and verify it. Every writer must succeed (no SQLITE_BUSY: writes
# are BEGIN IMMEDIATE with a busy timeout), no row may be lost, the store must verify, and so must
# every verify beside the writers (found by review: verify read the manifest and the runs at two
# moments and called a run begun meanwhile deleted).
# Usage: concurrency_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
WRITERS=8
N=50  # trials: 18 cases of them make 144 write transactions over the eight writers
pids=()
for ((w = 0; w < WRITERS; w++)); do
  "$D9M" run --profile quick --backend cpu --op 'bias_add*' --op scatter_add --op unsorted_segment_sum -n $N --threads 1 -q \
    --db "$T/s.sqlite" > /dev/null 2> "$T/w$w.err" &
  pids+=($!)
done
writing() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && return 0; done; return 1; }
# Readers while the writers write, up to 20 reports. The store appears only once a writer has
# started (a while under the sanitizers): before, a reader that waited a fixed second saw none.
readers_ok=0 r=0
while ((r < 20)) && writing; do
  if [[ -e $T/s.sqlite ]]; then
    r=$((r + 1))
    out=$("$D9M" report --db "$T/s.sqlite" --format csv 2>&1 > /dev/null)
    rc=$?
    if ((rc == 0 || rc == 1)); then readers_ok=$((readers_ok + 1)); else fail "a reader failed during the writes (exit $rc): $out"; fi
    out=$("$D9M" verify --db "$T/s.sqlite" 2>&1)
    rc=$?
    ((rc == 0)) || fail "verify during the writes (exit $rc): $(grep -m2 -E 'FAULT|d9m:' <<< "$out")"
  fi
  sleep 0.05
done
for ((w = 0; w < WRITERS; w++)); do
  wait "${pids[$w]}" || { rc=$?; cat "$T/w$w.err"; fail "writer $w exited $rc"; }
  grep -qi "locked\|busy" "$T/w$w.err" && { cat "$T/w$w.err"; fail "writer $w saw a busy store"; }
done
"$D9M" verify --db "$T/s.sqlite" > "$T/v" || { cat "$T/v"; fail "verify"; }
python3 - "$T/s.sqlite" $WRITERS $N "$T"/w*.err << 'PY' || fail "rows lost"
import re, sqlite3, sys
db, writers, n = sqlite3.connect(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
claimed = {}
for path in sys.argv[4:]:
    m = re.search(r"run ([0-9a-f]{32}): (\d+) cases into", open(path).read())
    assert m, f"{path}: no summary line"
    claimed[m.group(1)] = int(m.group(2))
runs = dict(db.execute("select id, state from runs").fetchall())
assert len(runs) == writers and set(runs) == set(claimed), (len(runs), writers)
assert set(runs.values()) == {"complete"}, runs
for run, cases in claimed.items():
    got = db.execute("select count(*) from case_runs where run_id = ?", (run,)).fetchone()[0]
    assert got == cases, (run, got, cases)
    rows = db.execute("select count(*) from trials where run_id = ?", (run,)).fetchone()[0]
    assert rows == cases * n, (run, rows, cases * n)
total = db.execute("select count(*) from trials").fetchone()[0]
print(f"{writers} writers: {len(runs)} runs, {sum(claimed.values())} case rows, {total} trial rows, none lost")
PY
echo "readers during the writes: $readers_ok succeeded"
((readers_ok > 0)) || fail "no reader read the store while the writers wrote"
exit $((failures > 0))
