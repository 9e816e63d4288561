#!/usr/bin/env bash
# Integrity end to end (issue 11, "Integrity" and merge): an auditor tampers with stores using
# Python's sqlite3 and checks that `d9m verify` catches every edit, deletion and insertion; a run
# cut short, run metadata and whole runs; the write-ahead log beside an attested store; attest on
# a store that fails verify or with another store's report; verify --attestation on unsigned,
# forged and malformed input; merge that fails without touching OUT, merges a running run
# idempotently in any order, refuses tampered inputs, and writes through a symlink.
# Usage: integrity_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
pass=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check NAME EXPECTED_RC ACTUAL_RC [OUTPUT_FILE PATTERN]
  local name=$1 want=$2 got=$3
  if [[ $got != "$want" ]]; then
    fail "$name: exit $got, expected $want"; [[ -n ${4:-} ]] && cat "$4"; return
  fi
  if [[ -n ${4:-} ]] && ! grep -qE -- "$5" "$4"; then
    fail "$name: output does not match /$5/:"; cat "$4"; return
  fi
  pass=$((pass + 1))
}
sql() {  # sql DB STATEMENTS: as an attacker runs them (no foreign keys, no CHECK constraints)
  python3 - "$1" "$2" << 'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA foreign_keys = OFF"); c.execute("PRAGMA ignore_check_constraints = ON")
c.executescript(sys.argv[2]); c.close()
PY
}
value() { python3 -c "import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone(); print(r[0] if r else '')" "$1" "$2"; }
# killed_run DB K ARGS...: starts `d9m run ARGS --db DB`, SIGKILLs it once DB holds K case rows,
# and folds the write-ahead log into the file (no change to what readers see).
killed_run() {
  local db=$1 k=$2
  shift 2
  python3 - "$D9M" "$db" "$k" "$@" << 'PY'
import sqlite3, subprocess, sys, time
d9m, db, k, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def stored():
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.01); n = c.execute("select count(*) from case_runs").fetchone()[0]; c.close(); return n
    except sqlite3.Error:
        return -1
p = subprocess.Popen([d9m, *args, "--db", db], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while p.poll() is None and stored() < k:
    time.sleep(0.002)
p.kill(); p.wait()
assert stored() >= k, "the run ended before it could be killed"
c = sqlite3.connect(db); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()  # one file, so that cp copies all of it
PY
}
SMALL=(--backend cpu --op bias_add_grad --op scatter_add -n 3 --threads 2 -q)
"$D9M" run "${SMALL[@]}" --db a.sqlite 2> /dev/null || fail "run a"
OMP_NUM_THREADS=3 "$D9M" run "${SMALL[@]}" --db a.sqlite 2> /dev/null || fail "run a, second stack"  # an env var in the fingerprint
"$D9M" verify --db a.sqlite > out; check "verify a" 0 $? out ": OK \(2 runs"
FIRST=$(value a.sqlite "select id from runs order by started_at, rowid limit 1")
SECOND=$(value a.sqlite "select id from runs where id != '$FIRST'")

# --- the auditor: every row of every table edited (each column, in value and in type), deleted,
# and forged ------------------------------------------------------------------------------------
# (a store of one case and 2 trials, so that every row can be tried; manifest_origin's id only
# names where this file appends next and holds no evidence: docs/ATTESTATION.md)
"$D9M" run --backend cpu --op bias_add_grad --config nhwc_8x16x16x32 --variant cpu.serial -n 2 -q --no-canaries --db tiny.sqlite 2> /dev/null
"$D9M" run --backend cpu --op bias_add_grad --config nhwc_8x16x16x32 --variant cpu.atomic -n 2 -q --no-canaries --db tiny.sqlite 2> /dev/null
python3 - "$D9M" tiny.sqlite << 'PY'
import os, shutil, sqlite3, subprocess, sys
d9m, pristine = sys.argv[1], sys.argv[2]
def verify(sql):
    shutil.copy(pristine, "t.sqlite")
    c = sqlite3.connect("t.sqlite", isolation_level=None)
    c.execute("PRAGMA foreign_keys = OFF"); c.execute("PRAGMA ignore_check_constraints = ON")
    c.executescript(sql)
    assert c.total_changes > 0, sql
    c.close()
    return subprocess.run([d9m, "verify", "--db", "t.sqlite"], capture_output=True).returncode
db = sqlite3.connect(pristine)
tables = ["fingerprints", "runs", "cases", "case_runs", "trial_rows", "manifest", "manifest_origin"]  # as stored: the trials view shows trial_rows
missed, tried = [], 0
for t in tables:
    cols = [r[1] for r in db.execute(f"pragma table_info({t})")]
    for i, row in enumerate(db.execute(f"select {', '.join(cols)} from {t}").fetchall()):
        where = " AND ".join(f"{c} IS {'NULL' if v is None else repr(v) if isinstance(v, str) else f'X{v.hex()!r}' if isinstance(v, bytes) else v}" for c, v in zip(cols, row))
        # Every column of a table's first row through the CLI, every row deleted; every column of
        # every row is IntegrityTest.EveryEditOfEveryColumnOfEveryRowOfEveryTableIsCaught's, in
        # process (a d9m verify a tampering: 330 of them took a minute under the sanitizers).
        edits = [] if t == "manifest_origin" or i > 0 else [
            f"UPDATE {t} SET {c} = " + ("1" if v is None else f"{c} + 1000" if isinstance(v, int) else f"{c} + 0.5" if isinstance(v, float) else f"{c} || 'x'") + f" WHERE {where}"
            for c, v in zip(cols, row)]
        # the same value as d9m reads it, stored as another type (2.25 reads as 2, a BLOB as its text)
        retypes = [] if t == "manifest_origin" or i > 0 else [
            f"UPDATE {t} SET {c} = " + (f"{c} + 0.25" if isinstance(v, int) else f"CAST({c} AS BLOB)") + f" WHERE {where}"
            for c, v in zip(cols, row) if isinstance(v, (int, str)) and (t, c) != ("trial_rows", "id")]  # a rowid is only ever an integer
        for s in edits + retypes + [f"DELETE FROM {t} WHERE {where}"]:
            tried += 1
            if verify(s) != 1: missed.append(s)
forged = ["INSERT INTO fingerprints VALUES ('44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', '{}')",
          "INSERT INTO runs SELECT '" + "9" * 32 + "', fingerprint_id, state, started_at, finished_at, host, gpu_uuids, d9m_version, d9m_commit, catalog_digest, trials_per_case, threads, arguments, chain_root, plan_digest, resumes, chain_version FROM runs LIMIT 1",
          "INSERT INTO cases SELECT '" + "f" * 64 + "', op, variant, backend, config, config_id, params, seed, input_digest, output_dtype, output_shape, dtype, math FROM cases LIMIT 1",
          "INSERT INTO trials SELECT run_id, case_id, 2, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain, choice FROM trials WHERE trial = 1 LIMIT 1",
          "INSERT INTO trial_rows SELECT id + 1, digest, elapsed_ns, diff_count, diff_max_abs, diff_max_ulp, diff_first_index, chain, choice FROM trial_rows WHERE id % 4294967296 = 1 LIMIT 1",
          "INSERT INTO manifest SELECT '" + "f" * 64 + "', link, origin, seq + 1, at, event, run_id, detail FROM manifest ORDER BY seq DESC LIMIT 1",
          "INSERT INTO manifest_origin VALUES ('" + "0" * 32 + "')"]
for s in forged:
    tried += 1
    if verify(s) != 1: missed.append(s)
print(f"auditor: {tried} tamperings tried, {len(missed)} missed")
for m in missed: print("  missed:", m)
sys.exit(1 if missed or tried < 140 else 0)
PY
check "auditor: every edit, deletion and forged row is caught" 0 $?

# --- item 4: the last case of a complete run deleted and its root set to NULL -------------------
cp a.sqlite t4.sqlite
sql t4.sqlite "DELETE FROM trials WHERE run_id = '$FIRST' AND case_id = (SELECT case_id FROM case_runs WHERE run_id = '$FIRST' ORDER BY seq DESC LIMIT 1);
  DELETE FROM case_runs WHERE run_id = '$FIRST' AND seq = (SELECT max(seq) FROM case_runs WHERE run_id = '$FIRST');
  UPDATE runs SET chain_root = NULL WHERE id = '$FIRST'"
"$D9M" verify --db t4.sqlite > out; check "item 4: a truncated run with its root cleared" 1 $? out "has no chain root"

# --- item 5: run metadata, the run's stack, whole runs ----------------------------------------
for edit in "host = 'elsewhere'" "d9m_version = '9.9.9'" "catalog_digest = 'x'" "started_at = '2020-01-01T00:00:00Z'" \
            "fingerprint_id = (SELECT fingerprint_id FROM runs WHERE id = '$SECOND')"; do
  cp a.sqlite t5.sqlite
  sql t5.sqlite "UPDATE runs SET $edit WHERE id = '$FIRST'"
  "$D9M" verify --db t5.sqlite > out; check "item 5: runs edited: $edit" 1 $? out "FAULT: .*(metadata|hash chain)"
done
cp a.sqlite t5.sqlite
sql t5.sqlite "DELETE FROM trials WHERE run_id = '$FIRST'; DELETE FROM case_runs WHERE run_id = '$FIRST'; DELETE FROM runs WHERE id = '$FIRST'"
"$D9M" verify --db t5.sqlite > out; check "item 5: a whole run deleted" 1 $? out "is not in the store \(deleted\)"

# --- item 6: the write-ahead log ----------------------------------------------------------------
openssl genpkey -algorithm ed25519 -out key.pem 2> /dev/null && openssl pkey -in key.pem -pubout -out pub.pem
cp a.sqlite w.sqlite
"$D9M" report --db w.sqlite --format json -o w.json && "$D9M" attest --db w.sqlite --report w.json --key key.pem -o w.att
check "item 6: attest a single-file store" 0 $?
# A change left in the log (the writer died before any checkpoint): readers see it, the file's
# hash does not.
python3 -c "
import os, sqlite3
c = sqlite3.connect('w.sqlite'); c.execute(\"UPDATE case_runs SET detail = 'edited in the log'\"); c.commit(); os._exit(0)"
[[ -s w.sqlite-wal ]] || fail "item 6: the test left no write-ahead log"
"$D9M" verify --attestation w.att --pubkey pub.pem > out; check "item 6: verify --attestation sees the log beside the store" 1 $? out "write-ahead log lies beside it"
"$D9M" report --db w.sqlite --format json --no-verify -o w2.json
"$D9M" attest --db w.sqlite --report w2.json --key key.pem -o w2.att 2> err; check "item 6: attest refuses a store with a log" 3 $? err "has a write-ahead log"
"$D9M" report --db w.sqlite --format md --audit -o audit.md 2> err; check "item 6: report --audit refuses a store with a log" 3 $? err "has a write-ahead log"

# A rollback journal beside an attested store: d9m stores never have one, and the next writer
# would play its pages into the file (found by audit: verify --attestation said OK, and `d9m run`
# added its run to the store the journal made).
cp a.sqlite j.sqlite
"$D9M" report --db j.sqlite --format json -o j.json && "$D9M" attest --db j.sqlite --report j.json --key key.pem -o j.att
check "item 6: attest the store the journal will lie beside" 0 $?
printf 'not a journal SQLite wrote, but one it would read as hot: any bytes' > j.sqlite-journal
before=$(sha256sum < j.sqlite)
"$D9M" verify --attestation j.att --pubkey pub.pem > out; check "item 6: verify --attestation sees a journal beside the store" 1 $? out "rollback journal lies beside it"
for verb in "verify --db j.sqlite" "report --db j.sqlite" "run --backend cpu --op bias_add -n 2 -q --db j.sqlite"; do
  "$D9M" $verb > /dev/null 2> err; check "item 6: $verb refuses a store with a journal" 3 $? err "a rollback journal lies beside it"
done
[[ $(sha256sum < j.sqlite) == "$before" ]] || fail "item 6: a store with a journal beside it was written"

# --- item 7: attest verifies first, and binds the report to its store -------------------------
cp a.sqlite t7.sqlite
"$D9M" report --db t7.sqlite --format json -o t7.json
sql t7.sqlite "UPDATE trials SET digest = '0123456789abcdef0123456789abcdef' WHERE trial = 1 AND run_id = '$FIRST'"
"$D9M" attest --db t7.sqlite --report t7.json --key key.pem -o t7.att 2> err; check "item 7: attest refuses a store that fails verify" 1 $? err "does not verify, so it is not attested"
[[ ! -e t7.att ]] || fail "item 7: an attestation was written for a tampered store"
"$D9M" run --backend cpu --op bias_add -n 2 -q --db other.sqlite 2> /dev/null
"$D9M" report --db other.sqlite --format json -o other.json
"$D9M" attest --db a.sqlite --report other.json --key key.pem -o x.att 2> err; check "item 7: a report of another store" 2 $? err "rendered from another store"
for f in md html junit; do
  "$D9M" report --db a.sqlite --format $f -o a.$f
  "$D9M" attest --db a.sqlite --report a.$f --key key.pem -o a.$f.att 2> err; check "item 7: attest a $f report" 0 $?
  "$D9M" attest --db other.sqlite --report a.$f --key key.pem -o x.att 2> err; check "item 7: a $f report of another store" 2 $? err "rendered from another store"
done
# A report of part of the store (--stacks, --run) has the store's evidence digest but the verdict
# of that part only; the statement is of the whole store (found by review: a report whose
# verdict passed on S1 was attested beside a statement that FAILED on S2).
for f in json md html junit; do
  "$D9M" report --db a.sqlite --format $f --stacks S1 -o part.$f
  "$D9M" attest --db a.sqlite --report part.$f --key key.pem -o x.att 2> err; check "item 7: a $f report of one stack" 2 $? err "rendered from part of the store"
  "$D9M" report --db a.sqlite --format $f --run "$FIRST" -o part.$f
  "$D9M" attest --db a.sqlite --report part.$f --key key.pem -o x.att 2> err; check "item 7: a $f report of one run" 2 $? err "rendered from part of the store"
done
# --run takes the start of an id, as the reports print it (12 characters).
"$D9M" report --db a.sqlite --format md --run "${FIRST:0:12}" -o short.md 2> err; check "report --run with the 12 characters printed" 0 $? short.md "^# selection: run $FIRST"
"$D9M" report --db a.sqlite --format md --run "${FIRST:0:12}x" -o none.md 2> err; check "report --run naming no run" 2 $? err "no run in .* has an id starting with"
[[ ! -e none.md ]] || fail "report --run naming no run wrote a report"
grep -q '^# selection: stacks S1 ' a.md part.md && fail "item 7: a whole-store report names a selection"
"$D9M" report --db a.sqlite --format md --stacks S1 -o part.md && grep -q '^# selection: stacks S1 ' part.md ||
  fail "item 7: a report of one stack does not name its selection"
# A report edited after rendering keeps its store's evidence digest, which binds only its header
# (found by review: a cell made "D" and a FAIL made PASS were signed). Only the time it was
# rendered may differ from what d9m renders from the store now.
"$D9M" report --db a.sqlite --format json -o a.json
for f in md html json junit; do
  # A NONDETERMINISTIC made DETERMINISTIC; where no case of this short run happened to race (3
  # trials on a loaded machine: the html and junit reports then name no NONDETERMINISTIC, found by a
  # fresh-clone run), a DETERMINISTIC made NONDETERMINISTIC: a status cell edited either way.
  python3 -c '
import sys
t = open(sys.argv[1]).read()
a, b = ("NONDETERMINISTIC", "DETERMINISTIC") if "NONDETERMINISTIC" in t else ("DETERMINISTIC", "NONDETERMINISTIC")
assert a in t
open(sys.argv[2], "w").write(t.replace(a, b, 1))' a.$f edited.$f
  "$D9M" attest --db a.sqlite --report edited.$f --key key.pem -o x.att 2> err; check "item 7: an edited $f report" 2 $? err "is not the report this d9m renders"
  sed -E "s/20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z/$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)/g" a.$f > retimed.$f
  cmp -s a.$f retimed.$f && fail "item 7: the $f report names no time"
  "$D9M" attest --db a.sqlite --report retimed.$f --key key.pem -o x.att 2> err; check "item 7: a $f report rendered at another time" 0 $?
  # ...but one it could have been rendered at (found by review: a year before its runs was signed)
  for when in 1999-12-31T23:59:59Z 9999-99-99T99:99:99Z; do
    sed -E "s/20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z/$when/g" a.$f > retimed.$f
    "$D9M" attest --db a.sqlite --report retimed.$f --key key.pem -o x.att 2> err; check "item 7: a $f report rendered at $when" 2 $? err "as the time it was rendered"
  done
done
for f in md html; do
  "$D9M" report --db a.sqlite --format $f --audit -o audit.$f
  "$D9M" attest --db a.sqlite --report audit.$f --key key.pem -o x.att 2> err; check "item 7: attest an audit $f report" 0 $?
done
# -o naming the store or the report attested would replace it (found by review: it did).
cp a.md own.md
"$D9M" attest --db a.sqlite --report own.md --key key.pem -o own.md 2> err; check "item 7: attest -o the report" 2 $? err "which this command reads"
"$D9M" attest --db a.sqlite --report own.md --key key.pem -o ./a.sqlite 2> err; check "item 7: attest -o the store" 2 $? err "which this command reads"
"$D9M" report --db a.sqlite -o a.sqlite 2> err; check "report -o the store" 2 $? err "which this command reads"
# ...and so would -o naming one of its side files, existing or not, through a link or not (found
# by audit: `report -o STORE-wal` replaced an interrupted run's log and verify then said OK).
ln -sf a.sqlite side-link.sqlite
for side in -wal -shm -journal -runlease; do
  "$D9M" report --db a.sqlite -o a.sqlite$side 2> err; check "report -o the store's $side" 2 $? err "names the side file $side of a.sqlite"
  "$D9M" report --db side-link.sqlite -o a.sqlite$side 2> err; check "report through a link -o the store's $side" 2 $? err "names the side file $side"
  "$D9M" diff a.sqlite a.sqlite -o a.sqlite$side 2> err; check "diff -o the store's $side" 2 $? err "names the side file"
  "$D9M" baseline pin --db a.sqlite -o a.sqlite$side 2> err; check "baseline pin -o the store's $side" 2 $? err "names the side file"
done
[[ -e a.sqlite-journal ]] && fail "a refused -o created the store's journal"
rm side-link.sqlite
cmp -s a.md own.md || fail "item 7: the report attested was changed"
"$D9M" verify --db a.sqlite > out; check "the store is intact after -o refusals" 0 $? out ": OK"
# The audit report names its time twice (header, identification): once changed, it is two times.
sed -E '0,/20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z/s//1999-12-31T23:59:59Z/' audit.md > retimed.md
"$D9M" attest --db a.sqlite --report retimed.md --key key.pem -o x.att 2> err; check "item 7: a report naming two times" 2 $? err "is not the report this d9m renders"
"$D9M" report --db a.sqlite --format csv -o a.csv
"$D9M" attest --db a.sqlite --report a.csv --key key.pem -o x.att 2> err; check "item 7: a CSV report" 2 $? err "CSV report names no evidence digest"

# --- item 8: verify --attestation on unsigned, forged and malformed input -----------------------
# sign FILE PAYLOAD_JSON: an envelope of PAYLOAD_JSON signed with key.pem (as an attacker holding
# no key cannot, and a careless signer might)
sign() {
  python3 - "$1" "$2" << 'PY'
import base64, json, subprocess, sys
out, payload = sys.argv[1], sys.argv[2].encode()
t = b"application/vnd.in-toto+json"
open("pae.bin", "wb").write(b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload))
subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", "key.pem", "-rawin", "-in", "pae.bin", "-out", "sig.bin"], check=True)
json.dump({"payloadType": t.decode(), "payload": base64.b64encode(payload).decode(),
           "signatures": [{"keyid": "", "sig": base64.b64encode(open("sig.bin", "rb").read()).decode()}]}, open(out, "w"))
PY
}
ZERO='{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "/dev/zero", "digest": {"sha256": "'$(printf '0%.0s' {1..64})'"}}], "predicateType": "https://in-toto.io/attestation/test-result/v0.1", "predicate": {"result": "PASSED"}}'
python3 -c "
import base64, json, sys
json.dump({'payloadType': 'application/vnd.in-toto+json', 'payload': base64.b64encode(sys.argv[1].encode()).decode(),
           'signatures': [{'keyid': '', 'sig': base64.b64encode(b'x' * 64).decode()}]}, open('forged.att', 'w'))" "$ZERO"
timeout 20 "$D9M" verify --attestation forged.att --pubkey pub.pem > out; check "item 8: a forged envelope naming /dev/zero" 1 $? out "no signature verifies"
sign zero.att "$ZERO"
timeout 20 "$D9M" verify --attestation zero.att --pubkey pub.pem > out; check "item 8: a signed statement naming /dev/zero" 1 $? out "/dev/zero: not a regular file"
mkfifo fifo
timeout 20 "$D9M" verify --attestation fifo --pubkey pub.pem 2> err; check "item 8: a FIFO as the envelope" 2 $? err "not a regular file"
# Keys are files named on the command line too: a FIFO hung both verbs (found by review).
timeout 20 "$D9M" verify --attestation zero.att --pubkey fifo 2> err; check "item 8: a FIFO as the public key" 2 $? err "fifo: the key: not a regular file"
timeout 20 "$D9M" attest --db a.sqlite --report a.md --key fifo -o x.att 2> err; check "attest: a FIFO as the private key" 2 $? err "fifo: the key: not a regular file"
head -c $((65 * 1024 * 1024)) /dev/zero > big.att
timeout 20 "$D9M" verify --attestation big.att --pubkey pub.pem 2> err; check "item 8: an envelope over the size limit" 2 $? err "more than the 67108864 allowed"
n=0
for bad in '[]' '{"payloadType": 1}' '{"payloadType": "application/vnd.in-toto+json", "payload": 7}' \
           '{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": [1]}' \
           '{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": "x"}' \
           '{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": [{"sig": 5}]}' \
           '{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": [{"sig": "e30=", "keyid": []}]}' \
           '{"payloadType": "application/vnd.in-toto+json", "payload": "not base64!"}' '{"a": ' '' '{"payloadType": 1e999999}'; do
  n=$((n + 1)); printf '%s' "$bad" > bad$n.att
  timeout 20 "$D9M" verify --attestation bad$n.att --pubkey pub.pem > out 2> err; check "item 8: malformed envelope $n ($bad)" 2 $? err "bad$n.att: "
done
for stmt in '[]' '{"_type": "https://in-toto.io/Statement/v1", "subject": 3}' \
            '{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "a.sqlite", "digest": {"sha256": 5}}]}' \
            '{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": 1}], "predicate": {"result": 2}}' 'not json' \
            '{"_type": "https://in-toto.io/Statement/v1", "n": 1e999999}'; do
  n=$((n + 1)); sign bad$n.att "$stmt"
  timeout 20 "$D9M" verify --attestation bad$n.att --pubkey pub.pem > out 2> err; check "item 8: signed malformed statement ($stmt)" 2 $? err "bad$n.att: "
done

# --- item 10: a failed merge leaves OUT as it was ---------------------------------------------
# OUT of schema 1 (the migration) and OUT with a dead 'running' run (marking it interrupted),
# each merged with an input that conflicts: refused, and OUT unchanged byte for byte.
cp "$HERE/../store/v1-store.sqlite" old.sqlite
killed_run dead.sqlite 3 run "${SMALL[@]}"
[[ $(value dead.sqlite "select state from runs") == running ]] || fail "item 10: the killed run is not left running"
for out in old dead; do
  cp $out.sqlite $out-bad.sqlite
  sql $out-bad.sqlite "UPDATE trials SET elapsed_ns = elapsed_ns + 1 WHERE trial = 0"
  before=$(sha256sum < $out.sqlite)
  "$D9M" merge -o $out.sqlite $out-bad.sqlite 2> err; check "item 10: merge into $out with a tampered input" 1 $? err "does not verify, so it is not merged"
  [[ $(sha256sum < $out.sqlite) == "$before" ]] || fail "item 10: the failed merge changed $out.sqlite"
  ls $out.sqlite.* > /dev/null 2>&1 && fail "item 10: the failed merge left files beside $out.sqlite: $(ls $out.sqlite.*)"
done
[[ $(value old.sqlite "pragma user_version") == 1 ]] || fail "item 10: the failed merge migrated OUT"
[[ $(value dead.sqlite "select state from runs") == running ]] || fail "item 10: the failed merge marked OUT's run interrupted"

# --- item 11: a run left running merges idempotently, in any order, also once it has ended ----
cp dead.sqlite s-running.sqlite
"$D9M" merge -o m1.sqlite s-running.sqlite > out; check "item 11: merge a running run" 0 $?
before=$(sha256sum < m1.sqlite)
"$D9M" merge -o m1.sqlite s-running.sqlite > out; check "item 11: merge it again" 0 $? out " 0 rows added.*the file is left as it was"
# ...byte for byte (found by audit: a merge that added nothing rewrote OUT, and an attestation failed)
[[ $(sha256sum < m1.sqlite) == "$before" ]] || fail "item 11: a merge that added nothing changed OUT"
"$D9M" merge -o m1.sqlite m1.sqlite > out; check "item 11: merge OUT into itself" 0 $? out "the file is left as it was"
[[ $(sha256sum < m1.sqlite) == "$before" ]] || fail "item 11: merging OUT into itself changed it"
"$D9M" run "${SMALL[@]}" --resume --db dead.sqlite 2> err; check "item 11: the run resumed to its end" 0 $? err "resumed run"
"$D9M" merge -o m1.sqlite dead.sqlite > out; check "item 11: merge it once it ended" 0 $? out "advanced to a later state"
"$D9M" merge -o m1.sqlite s-running.sqlite dead.sqlite > out; check "item 11: and again" 0 $? out " 0 rows added"
"$D9M" merge -o m2.sqlite dead.sqlite s-running.sqlite > /dev/null; check "item 11: the other order" 0 $?
"$D9M" verify --db m1.sqlite > out; check "item 11: the merged store verifies" 0 $? out ": OK"
for m in m1 m2; do
  python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute('select id, state, finished_at, chain_root, resumes from runs order by id').fetchall())
print(c.execute('select run_id, case_id, chain from case_runs order by 1, 2').fetchall())
print(sorted(r[0] for r in c.execute('select link from manifest')))" $m.sqlite > $m.rows
done
cmp -s m1.rows m2.rows; check "item 11: the same runs, case rows and run events in either order" 0 $?
[[ $(value m1.sqlite "select state from runs") == complete ]] || fail "item 11: the merged run is not complete"
cp a.sqlite bad-in.sqlite
sql bad-in.sqlite "UPDATE runs SET host = 'elsewhere'"
before=$(sha256sum < m1.sqlite)
"$D9M" merge -o m1.sqlite bad-in.sqlite 2> err; check "item 11: a tampered input" 1 $? err "does not verify"
[[ $(sha256sum < m1.sqlite) == "$before" ]] || fail "item 11: a refused merge changed OUT"
# A genuine conflict: the same interrupted run resumed in two copies ends differently in each.
killed_run fork.sqlite 3 run "${SMALL[@]}"
cp fork.sqlite fork2.sqlite
"$D9M" run "${SMALL[@]}" --resume --db fork.sqlite 2> /dev/null
"$D9M" run "${SMALL[@]}" --resume --db fork2.sqlite 2> /dev/null
"$D9M" merge -o forks.sqlite fork.sqlite fork2.sqlite 2> err; check "item 11: one run continued in two copies" 2 $? err "conflicts with what is already merged"
[[ ! -e forks.sqlite ]] || fail "item 11: a conflicting merge left an output"
# The last case of an interrupted run removed, then the run resumed (found by audit: the case ran
# again and verify said OK after): resume refuses a store that does not verify, and verify checks
# every end of a run against the rows it had then (suites/unit/integrity_test.cpp).
killed_run cut.sqlite 3 run "${SMALL[@]}"
"$D9M" run --backend cpu --op bias_add -n 2 -q --no-canaries --db cut.sqlite 2> /dev/null  # a write: marks it interrupted
sql cut.sqlite "DELETE FROM trial_rows WHERE id >= (SELECT max(num) FROM case_runs WHERE seq = (SELECT max(seq) FROM case_runs cr2 WHERE cr2.run_id = case_runs.run_id) AND run_id = (SELECT id FROM runs WHERE state = 'interrupted')) * 4294967296 AND id < ((SELECT max(num) FROM case_runs WHERE seq = (SELECT max(seq) FROM case_runs cr2 WHERE cr2.run_id = case_runs.run_id) AND run_id = (SELECT id FROM runs WHERE state = 'interrupted')) + 1) * 4294967296;
DELETE FROM case_runs WHERE run_id = (SELECT id FROM runs WHERE state = 'interrupted') AND seq = (SELECT max(seq) FROM case_runs WHERE run_id = (SELECT id FROM runs WHERE state = 'interrupted'))"
"$D9M" verify --db cut.sqlite > out; check "item 11: a case removed from an interrupted run" 1 $? out "FAULT"
before=$(sha256sum < cut.sqlite)
"$D9M" run "${SMALL[@]}" --resume --db cut.sqlite 2> err; check "item 11: resume refuses a store that does not verify" 1 $? err "does not verify, so it is not resumed in"
[[ $(sha256sum < cut.sqlite) == "$before" ]] || fail "item 11: a refused resume changed the store"

# --- item 12: merge -o through a symlink writes where run --db writes ---------------------------
mkdir real
cp other.sqlite real/store.sqlite
ln -s real/store.sqlite link.sqlite
"$D9M" merge -o link.sqlite a.sqlite > /dev/null; check "item 12: merge -o a symlink" 0 $?
[[ -L link.sqlite ]] || fail "item 12: merge replaced the symlink by a file"
[[ $(value real/store.sqlite "select count(*) from runs") == 3 ]] || fail "item 12: the merged runs are not in the file the link names"
"$D9M" verify --db link.sqlite > out; check "item 12: verify through the link" 0 $? out "OK \(3 runs"

# --- report --audit: only of a store that verifies, quoting the file's real SHA-256 -----------------
"$D9M" report --db other.sqlite --format md --audit -o audit.md; check "audit of a sound store" 0 $?
grep -q "SHA-256 \`$(sha256sum < other.sqlite | cut -d' ' -f1)\`" audit.md || fail "the audit report does not quote the store's SHA-256"
cp other.sqlite audited.sqlite
sql audited.sqlite "UPDATE runs SET host = 'elsewhere'"
"$D9M" report --db audited.sqlite --format html --audit -o audit2.html 2> err; check "audit of an edited store" 1 $? err "does not verify, so it is not rendered as an audit report"
[[ ! -e audit2.html ]] || fail "an audit report was written for a store that does not verify"

# --- an edited fingerprint: every report refuses it, and a run refuses it before its first case ----
cp other.sqlite fp.sqlite
sql fp.sqlite "UPDATE fingerprints SET canonical = replace(canonical, '\"os\"', '\"os_\"')"
"$D9M" report --db fp.sqlite --no-verify > out 2> err; check "an edited fingerprint: report --no-verify" 1 $? err "its id does not match its content"
# A plain report verifies first (found by audit: an edited store rendered its changed cells under
# the evidence digest of the store before the edit), and writes nothing.
for f in md html json junit csv; do
  "$D9M" report --db fp.sqlite --format $f -o fp.$f > out 2> err; check "an edited store: report --format $f" 1 $? err "does not verify, so it is not rendered"
  [[ ! -e fp.$f ]] || fail "a $f report was written for a store that does not verify"
done
runs_before=$(value fp.sqlite "select count(*) from runs")
"$D9M" run "${SMALL[@]}" --db fp.sqlite > out 2> err; check "an edited fingerprint: run refuses before any case" 1 $? err "its id does not match its content"
[[ $(value fp.sqlite "select count(*) from runs") == "$runs_before" ]] || fail "a run into a store with an edited fingerprint began"

echo "$pass passed, $failures failed"
[[ $failures == 0 ]]
