#!/usr/bin/env bash
# The d9m CLI end to end: exit codes of DESIGN.md, nothing modified on bad input, the same
# digests across thread counts and processes, one trial row per trial, .npy outputs.
# Usage: cli_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../check.sh"
q() { python3 -c "$1"; }
SMALL=(--backend cpu --op 'bias_add*' --op scatter_add --op maxpool2d_bwd)

# --- bad input: exit 2, a message naming the place, nothing written ---------------------------
printf '{\n  "schema": "d9m.catalog/1",\n  "configs": [\n    {"op": "bias_add", "name": "x", "params": {"n": 1, "h": 2 "w": 2}}\n  ]\n}\n' > "$T/syntax.json"
"$D9M" run --catalog "$T/syntax.json" --db "$T/s1.sqlite" 2> "$T/err"; check "syntax error" 2 $? "$T/err" 'syntax.json:4:[0-9]+: syntax error'
[[ ! -e $T/s1.sqlite ]] || { echo "FAIL: a store was created for a bad catalogue"; failures=$((failures + 1)); }
echo '{"schema": "d9m.catalog/1", "configs": [{"op": "bias_add", "name": "x", "params": {"n": 1, "h": -2, "w": 2, "c": 1}}]}' > "$T/neg.json"
"$D9M" run --catalog "$T/neg.json" --db "$T/s1.sqlite" 2> "$T/err"; check "negative shape" 2 $? "$T/err" 'neg.json: configs\[0\]\.params\.h: expected an integer'
echo '{"schema": "d9m.catalog/1", "configs": [{"op": "conv3d", "name": "x", "params": {}}]}' > "$T/op.json"
"$D9M" list --catalog "$T/op.json" 2> "$T/err"; check "unknown op" 2 $? "$T/err" 'configs\[0\]\.op: unknown op "conv3d"'
"$D9M" run --op 'no_such_op*' --db "$T/s1.sqlite" 2> "$T/err"; check "unknown --op glob" 2 $? "$T/err" "--op 'no_such_op\*' matches no op"
"$D9M" run --variant 'cpu.fast' --db "$T/s1.sqlite" 2> "$T/err"; check "unknown --variant glob" 2 $? "$T/err" "--variant 'cpu.fast' matches no variant"
"$D9M" run -n 1 --db "$T/s1.sqlite" 2> "$T/err"; check "-n 1" 2 $? "$T/err" "trials"
"$D9M" run --catalog "$T/missing.json" --db "$T/s1.sqlite" 2> "$T/err"; check "missing catalogue" 2 $? "$T/err" "missing.json: cannot read"
"$D9M" run --profile fast --db "$T/s1.sqlite" 2> "$T/err"; check "unknown profile" 2 $? "$T/err" 'unknown profile "fast" \(expected one of quick, default, models\)'
"$D9M" run --profile quick --catalog "$T/neg.json" --db "$T/s1.sqlite" 2> "$T/err"; check "--profile with --catalog" 2 $? "$T/err" "excludes"
[[ ! -e $T/s1.sqlite ]] || { echo "FAIL: a store was created for a bad profile"; failures=$((failures + 1)); }
# The quick profile: configs of the default catalogue, fewer of them, every op still there.
"$D9M" list --profile quick --cases > "$T/quick" 2> "$T/err"; check "list --profile quick" 0 $?
"$D9M" list --cases > "$T/all"
[[ -s $T/quick && $(wc -l < "$T/quick") -lt $(wc -l < "$T/all") ]] && ! comm -23 <(sort "$T/quick") <(sort "$T/all") | grep -q . ||
  { echo "FAIL: the quick profile's cases are not a smaller part of the default catalogue's"; failures=$((failures + 1)); }
[[ $(grep -v '^pipeline:' "$T/quick" | cut -d/ -f1 | sort -u) == $(grep -v '^pipeline:' "$T/all" | cut -d/ -f1 | sort -u) ]] ||
  { echo "FAIL: an op of the default catalogue has no case in the quick profile"; failures=$((failures + 1)); }
grep -q '^pipeline:cnn/5_steps/cpu cpu$' "$T/quick" || { echo "FAIL: the quick profile certifies no pipeline on the CPU"; failures=$((failures + 1)); }
[[ ! -e $T/s1.sqlite ]] || { echo "FAIL: a store was created on bad usage"; failures=$((failures + 1)); }

# --- environment problems: exit 3, the file untouched -----------------------------------------
"$D9M" run "${SMALL[@]}" -n 2 --db "$T/no/such/dir/d9m.sqlite" 2> "$T/err"; check "missing folder" 3 $? "$T/err" "does not exist"
"$D9M" run "${SMALL[@]}" -n 2 --db /proc/d9m.sqlite 2> "$T/err"; check "unwritable store path" 3 $? "$T/err" "cannot create the store"
head -c 10000 /dev/urandom > "$T/junk.sqlite"; before=$(sha256sum < "$T/junk.sqlite")
"$D9M" run "${SMALL[@]}" -n 2 --db "$T/junk.sqlite" 2> "$T/err"; check "not a store (run)" 3 $? "$T/err" "not a SQLite database"
"$D9M" report --db "$T/junk.sqlite" 2> "$T/err"; check "not a store (report)" 3 $? "$T/err" "not a SQLite database"
"$D9M" verify --db "$T/junk.sqlite" 2> "$T/err"; check "not a store (verify)" 3 $? "$T/err" "not a SQLite database"
[[ $(sha256sum < "$T/junk.sqlite") == "$before" ]] || { echo "FAIL: junk file modified"; failures=$((failures + 1)); }
ls "$T"/junk.sqlite-* > /dev/null 2>&1 && { echo "FAIL: files left beside the junk file"; failures=$((failures + 1)); }
"$D9M" report --db "$T/none.sqlite" 2> "$T/err"; check "report of a missing store" 3 $? "$T/err" "no such store"
"$D9M" report --db "$T/none.sqlite" --format pdf 2> "$T/err"; check "unknown format" 3 $? "$T/err" "no such store"

# --- a run: exit 0, every serial/ordered case DETERMINISTIC, one row per trial -----------------
"$D9M" run "${SMALL[@]}" -n 6 --threads 1 --db "$T/a.sqlite" --save-outputs "$T/out" > "$T/run.md" 2> "$T/err"; check "run" 0 $? "$T/err" "cases into"
grep -q "## Status by source" "$T/run.md" || { echo "FAIL: run printed no status table"; failures=$((failures + 1)); }
"$D9M" report --db "$T/a.sqlite" --format md -o "$T/r.md"; check "report md" 0 $?
"$D9M" report --db "$T/a.sqlite" --format pdf 2> "$T/err"; check "report pdf" 2 $? "$T/err" "--format must be"
"$D9M" verify --db "$T/a.sqlite" > "$T/v"; check "verify" 0 $? "$T/v" ": OK"
"$D9M" report --db "$T/a.sqlite" --format json -o "$T/a.json"; check "report json" 0 $?
q "
import json, sqlite3
r = json.load(open('$T/a.json'))
assert r['schema'] == 'd9m.report/1'
for x in r['results']:
    assert x['trials'] == 6, x
    if x['variant'] in ('cpu.serial', 'cpu.ordered'):
        assert x['status'] == 'DETERMINISTIC', x
    for k in ('op', 'variant', 'backend', 'config', 'stack', 'status', 'distinct', 'digest', 'claim', 'median_ns'):
        assert k in x, k
db = sqlite3.connect('$T/a.sqlite')
assert db.execute('select count(*) from trials').fetchone()[0] == 6 * len(r['results'])
" ; check "json report and trial rows" 0 $?

# --- --threads 3, and two processes at once: the same digest for every serial/ordered case ----
"$D9M" run "${SMALL[@]}" -n 4 --threads 3 --db "$T/b.sqlite" -q 2> /dev/null; check "run --threads 3" 0 $?
"$D9M" run "${SMALL[@]}" -n 4 --threads 2 --db "$T/c.sqlite" -q 2> /dev/null &
p1=$!
"$D9M" run "${SMALL[@]}" -n 4 --threads 2 --db "$T/c.sqlite" -q 2> /dev/null &
p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
check "process 1" 0 $r1; check "process 2" 0 $r2
"$D9M" report --db "$T/b.sqlite" --format json -o "$T/b.json"
"$D9M" report --db "$T/c.sqlite" --format json -o "$T/c.json"
q "
import json
def digests(p):
    return {(x['op'], x['config'], x['variant']): x for x in json.load(open(p))['results'] if x['variant'] in ('cpu.serial', 'cpu.ordered')}
a, b, c = digests('$T/a.json'), digests('$T/b.json'), digests('$T/c.json')
assert a.keys() == b.keys() == c.keys() and a
for k in a:
    assert a[k]['digest'] == b[k]['digest'] == c[k]['digest'], k
    assert c[k]['runs'] == 2 and c[k]['trials'] == 8 and c[k]['distinct'] == 1, c[k]
"; check "same digests: threads 1 vs 3, two processes" 0 $?

# --- saved inputs and outputs: valid .npy, sizes that match the config -------------------------
q "
import json, os, struct
base = '$T/out/scatter_add/collide_8192_into_16'
cfg = json.load(open(base + '/config.json'))
def npy(p):
    b = open(p, 'rb').read()
    assert b[:8] == b'\x93NUMPY\x01\x00', p
    n = struct.unpack('<H', b[8:10])[0]
    assert (10 + n) % 64 == 0, p
    h = eval(b[10:10 + n].decode())
    count = 1
    for s in h['shape']: count *= s
    assert len(b) - 10 - n == 4 * count, p
    return h
for i in cfg['inputs']:
    h = npy(base + '/inputs/' + i['name'] + '.npy')
    assert list(h['shape']) == i['shape'] and h['descr'] == ('<f4' if i['dtype'] == 'float32' else '<i4')
for v in ('cpu.serial', 'cpu.ordered', 'cpu.atomic'):
    assert list(npy(base + '/' + v + '.npy')['shape']) == cfg['output']['shape']
assert set(os.listdir(base + '/inputs')) == {'ref.npy', 'indices.npy', 'updates.npy'}
"; check "save-outputs" 0 $?

"$D9M" list --json > "$T/list.json"; check "list --json" 0 $?
"$D9M" fingerprint --json > "$T/fp.json"; check "fingerprint --json" 0 $?
q "
import json
f = json.load(open('$T/fp.json'))
for k in ('cpu_model', 'os', 'kernel', 'glibc'): assert f['fingerprint']['host'][k], k
assert 'CUBLAS_WORKSPACE_CONFIG' in f['fingerprint']['environment']
assert f['gpu_status']
"; check "fingerprint fields" 0 $?

# --- merge: two stacks, either order, the same results; re-merging changes nothing -------------
OMP_NUM_THREADS=3 "$D9M" run "${SMALL[@]}" -n 3 --db "$T/s2.sqlite" -q 2> /dev/null  # another stack: an env var in the fingerprint
"$D9M" merge -o "$T/m12.sqlite" "$T/a.sqlite" "$T/s2.sqlite" > /dev/null; check "merge a s2" 0 $?
"$D9M" merge -o "$T/m21.sqlite" "$T/s2.sqlite" "$T/a.sqlite" > /dev/null; check "merge s2 a" 0 $?
"$D9M" merge -o "$T/m12.sqlite" "$T/s2.sqlite" "$T/a.sqlite" > "$T/stdout"; check "re-merge" 0 $? "$T/stdout" " 0 rows added"
for m in m12 m21; do "$D9M" report --db "$T/$m.sqlite" --format json -o "$T/$m.json"; done
q "
import json
def norm(p):
    r = json.load(open(p))
    return (sorted(s['id'] for s in r['stacks']), sorted(json.dumps({k: v for k, v in x.items()}, sort_keys=True) for x in r['results']))
a, b = norm('$T/m12.json'), norm('$T/m21.json')
assert len(a[0]) == 2, a[0]
assert a == b
"; check "merge order-independent" 0 $?
# A merge killed before it cleaned up leaves OUT.merging-HOST-PID-RANDOM (and its log); the next
# merge into that OUT removes this host's whose process is gone, never a live one's or another
# host's (on a shared folder that may be a merge in progress).
h=$(hostname | tr -- '-/' '__')
sleep 30 & live=$!
dead=$(sh -c 'echo $$')
for f in "m12.sqlite.merging-$h-$dead-aaaa" "m12.sqlite.merging-$h-$dead-aaaa-wal" "m12.sqlite.merging-$h-$live-bbbb" "m12.sqlite.merging-otherhost-$dead-cccc"; do
  echo junk > "$T/$f"
done
"$D9M" merge -o "$T/m12.sqlite" "$T/a.sqlite" > /dev/null; check "merge beside an abandoned one" 0 $?
[[ ! -e $T/m12.sqlite.merging-$h-$dead-aaaa && ! -e $T/m12.sqlite.merging-$h-$dead-aaaa-wal ]] ||
  { echo "FAIL: an abandoned merge's files were left"; failures=$((failures + 1)); }
[[ -e $T/m12.sqlite.merging-$h-$live-bbbb && -e $T/m12.sqlite.merging-otherhost-$dead-cccc ]] ||
  { echo "FAIL: a live process's or another host's merge file was removed"; failures=$((failures + 1)); }
kill "$live" 2> /dev/null; wait "$live" 2> /dev/null
rm -f "$T"/m12.sqlite.merging-*
cp "$T/a.sqlite" "$T/conflict.sqlite"
q "
import sqlite3; c = sqlite3.connect('$T/conflict.sqlite'); c.execute('UPDATE trials SET elapsed_ns = elapsed_ns + 1 WHERE trial = 0'); c.commit()"
before=$(sha256sum < "$T/m12.sqlite")
# (an edited row breaks its hash chain: merge refuses the input before comparing; genuine
# conflicts between stores that each verify are tested in integrity_test.sh)
"$D9M" merge -o "$T/m12.sqlite" "$T/conflict.sqlite" 2> "$T/err"; check "merge of an edited store" 1 $? "$T/err" "conflict.sqlite: does not verify, so it is not merged"
[[ $(sha256sum < "$T/m12.sqlite") == "$before" ]] || { echo "FAIL: a refused merge modified the output"; failures=$((failures + 1)); }
"$D9M" merge -o "$T/x.sqlite" "$T/junk.sqlite" 2> "$T/err"; check "merge of a non-store" 3 $? "$T/err" "not a SQLite database"
[[ ! -e $T/x.sqlite ]] || { echo "FAIL: a failed merge left an output"; failures=$((failures + 1)); }

# --- every format from a merged store; JUnit valid against the Jenkins schema -----------------
for f in md html json junit csv; do "$D9M" report --db "$T/m12.sqlite" --format $f -o "$T/r.$f" || { echo "FAIL: report --format $f"; failures=$((failures + 1)); }; done
"$D9M" report --db "$T/m12.sqlite" --format html --audit -o "$T/audit.html"; check "html --audit" 0 $?
"$D9M" report --db "$T/m12.sqlite" --format md --audit -o "$T/audit.md"; check "md --audit" 0 $? "$T/audit.md" "## Acceptance criteria"
"$D9M" report --db "$T/m12.sqlite" --format csv --audit 2> "$T/err"; check "csv --audit" 2 $? "$T/err" "--audit goes with"
if command -v xmllint > /dev/null; then
  xmllint --noout --schema "$(dirname "$0")/../junit/jenkins-junit-10.xsd" "$T/r.junit" 2> "$T/err"; check "junit validates" 0 $?
fi
"$D9M" report --db "$T/m12.sqlite" --stacks S2 --format json -o "$T/s2only.json"; check "report --stacks" 0 $?
q "import json; r = json.load(open('$T/s2only.json')); assert len(r['stacks']) == 1 and all(x['stack'] == r['stacks'][0]['id'] for x in r['results'])"; check "--stacks selects" 0 $?
"$D9M" report --db "$T/m12.sqlite" --stacks S9 2> "$T/err"; check "unknown stack" 2 $? "$T/err" "stack 'S9' is not in"

# --- diff and baselines: exit 1 on a regressed claim or a drifted digest, 0 otherwise ---------
# (Regressions and drift from real evidence are in verdict_test.sh, with the fault variants; here
# a store edited to show one is refused, as merge and attest refuse it.)
"$D9M" diff "$T/a.sqlite" "$T/b.sqlite" > "$T/stdout"; check "diff, nothing regressed" 0 $? "$T/stdout" "No deterministic claim regressed"
"$D9M" diff "$T/m12.sqlite@S1" "$T/m12.sqlite@S2" > "$T/stdout"; check "diff of two stacks" 0 $? "$T/stdout" "cases compared"
# ...which says so, and names the fields in which the two stacks differ (found by review: a diff
# across stacks did not say the stacks differed, or in what).
check "diff of two stacks says they are" 0 0 "$T/stdout" "^A and B are two stacks: .* differ in 1 field"
check "diff of two stacks names the field" 0 0 "$T/stdout" '^- `/environment/OMP_NUM_THREADS: \(none\) -> 3`|^- `/environment/OMP_NUM_THREADS: .* -> 3`'
check "diff names each side's stack" 0 0 "$T/stdout" "^# B's stack S2: "
"$D9M" diff "$T/a.sqlite" "$T/b.sqlite" > "$T/stdout"; check "diff on one stack" 0 $? "$T/stdout" "cases compared"
grep -q 'two stacks' "$T/stdout" && { echo "FAIL: a diff on one stack says it is of two"; failures=$((failures + 1)); }
# A path with '@' in it (a Jenkins workspace "job@2") is a store, not a selector.
mkdir -p "$T/job@2" && cp "$T/a.sqlite" "$T/job@2/d9m.sqlite"
"$D9M" diff "$T/job@2/d9m.sqlite" "$T/a.sqlite" > "$T/stdout"; check "diff of a store in a folder with @" 0 $? "$T/stdout" "No deterministic claim regressed"
cp "$T/b.sqlite" "$T/broken.sqlite"
q "
import sqlite3; c = sqlite3.connect('$T/broken.sqlite')
cid = c.execute('SELECT cr.case_id FROM case_runs cr JOIN cases k ON k.id = cr.case_id WHERE k.variant = ? LIMIT 1', ('cpu.ordered',)).fetchone()[0]
c.execute('UPDATE trials SET digest = ? WHERE case_id = ? AND trial = 1', ('0' * 32, cid)); c.commit()"
"$D9M" diff "$T/a.sqlite" "$T/broken.sqlite" 2> "$T/err"; check "diff of an edited store" 1 $? "$T/err" "broken.sqlite: does not verify, so it is not compared"
"$D9M" baseline pin --db "$T/a.sqlite" -o "$T/base.json"; check "baseline pin" 0 $?
"$D9M" baseline check --db "$T/b.sqlite" "$T/base.json" > "$T/stdout"; check "baseline check, no drift" 0 $? "$T/stdout" "0 drifted"
# A certification test of a case the variant does not take certifies nothing: CTest's skip, not a
# pass (found by review: the controls beside it made it exit 0).
"$D9M" run -q --ctest --profile default -n 2 --db "$T/ct.sqlite" --op matmul --config nt_32x64x512_tf32 --variant cpu.ordered 2> /dev/null
check "run --ctest: an UNSUPPORTED case is a skip" 77 $?
"$D9M" run -q --ctest --profile default -n 2 --db "$T/ct.sqlite" --op matmul --config nt_32x64x512_tf32 --variant cpu.serial 2> /dev/null
check "run --ctest: the same config certified by a variant that takes it" 0 $?
cp "$T/b.sqlite" "$T/drift.sqlite"
q "
import sqlite3; c = sqlite3.connect('$T/drift.sqlite')
cid = c.execute('SELECT cr.case_id FROM case_runs cr JOIN cases k ON k.id = cr.case_id WHERE k.variant = ? LIMIT 1', ('cpu.serial',)).fetchone()[0]
c.execute('UPDATE trials SET digest = ? WHERE case_id = ?', ('f' * 32, cid)); c.commit()"
"$D9M" baseline check --db "$T/drift.sqlite" "$T/base.json" 2> "$T/err"; check "baseline check of an edited store" 1 $? "$T/err" "does not verify, so it is not checked"
"$D9M" baseline pin --db "$T/drift.sqlite" -o "$T/base2.json" 2> "$T/err"; check "baseline pin of an edited store" 1 $? "$T/err" "does not verify, so it is not pinned"
[[ ! -e $T/base2.json ]]; check "baseline pin of an edited store writes nothing" 0 $?
echo '{"schema": "nope"}' > "$T/bad.json"
"$D9M" baseline check --db "$T/b.sqlite" "$T/bad.json" 2> "$T/err"; check "bad baseline" 2 $? "$T/err" "not a d9m baseline"

# --- attestations: in-toto statement in a DSSE envelope, Ed25519 ---------------------------------
if command -v openssl > /dev/null; then
  openssl genpkey -algorithm ed25519 -out "$T/key.pem" 2> /dev/null
  openssl pkey -in "$T/key.pem" -pubout -out "$T/pub.pem"
  openssl genpkey -algorithm ed25519 -out "$T/other.pem" 2> /dev/null
  openssl pkey -in "$T/other.pem" -pubout -out "$T/otherpub.pem"
  (cd "$T" && "$D9M" report --db a.sqlite --format json -o att-report.json && "$D9M" attest --db a.sqlite --report att-report.json --key key.pem -o att.json)
  check "attest" 0 $?
  (cd "$T" && "$D9M" verify --attestation att.json --pubkey pub.pem > stdout); check "attestation verifies" 0 $? "$T/stdout" "OK, signature and subjects verify"
  q "
import base64, json, subprocess
env = json.load(open('$T/att.json'))
st = json.loads(base64.b64decode(env['payload']))
assert st['_type'] == 'https://in-toto.io/Statement/v1' and st['predicateType'] == 'https://in-toto.io/attestation/test-result/v0.1'
assert st['predicate']['result'] == 'PASSED' and st['predicate']['passedTests'] and 'failedTests' in st['predicate']
assert [x['name'] for x in st['subject']] == ['att-report.json', 'a.sqlite']
# DSSE PAE rebuilt here, signature checked by the openssl command line: the envelope is standard.
body = base64.b64decode(env['payload']); t = env['payloadType'].encode()
pae = b'DSSEv1 %d %s %d %s' % (len(t), t, len(body), body)
open('$T/pae.bin', 'wb').write(pae); open('$T/sig.bin', 'wb').write(base64.b64decode(env['signatures'][0]['sig']))
subprocess.run(['openssl', 'pkeyutl', '-verify', '-pubin', '-inkey', '$T/pub.pem', '-rawin', '-in', '$T/pae.bin', '-sigfile', '$T/sig.bin'], check=True, capture_output=True)
"; check "DSSE signature verifies with openssl" 0 $?
  cp "$T/att-report.json" "$T/att-report.orig"
  size=$(stat -c %s "$T/att-report.json")
  for pos in 0 $((size / 2)) $((size - 1)); do
    cp "$T/att-report.orig" "$T/att-report.json"
    q "
p = '$T/att-report.json'; b = bytearray(open(p, 'rb').read()); b[$pos] ^= 1; open(p, 'wb').write(b)"
    (cd "$T" && "$D9M" verify --attestation att.json --pubkey pub.pem > stdout); check "report byte $pos changed" 1 $? "$T/stdout" "does not match the attested"
  done
  cp "$T/att-report.orig" "$T/att-report.json"
  (cd "$T" && "$D9M" verify --attestation att.json --pubkey otherpub.pem > stdout); check "wrong key" 1 $? "$T/stdout" "no signature verifies"
  q "
import base64, json
env = json.load(open('$T/att.json')); st = json.loads(base64.b64decode(env['payload']))
st['predicate']['result'] = 'FAILED'; env['payload'] = base64.b64encode(json.dumps(st).encode()).decode()
json.dump(env, open('$T/forged.json', 'w'))"
  (cd "$T" && "$D9M" verify --attestation forged.json --pubkey pub.pem > stdout); check "forged payload" 1 $? "$T/stdout" "no signature verifies"
  (cd "$T" && "$D9M" attest --db a.sqlite --report att-report.json -o unsigned.json && "$D9M" verify --attestation unsigned.json --pubkey pub.pem > stdout)
  check "unsigned envelope" 1 $? "$T/stdout" "no signature verifies"
fi

# --- a full disk mid-run (a file size limit stands in): exit 3 naming it, nothing half-written,
# the cases before it kept, and --resume finishes the run once there is room. The cheap families
# of the quick profile only: their 57 cases of 50 trials make a store of 350 KB, which the limit
# (200 KB) stops about halfway; under the sanitizers the default profile's 204 cases took a
# minute, and the whole catalogue several --------------------------------------------------------
FULL=(--profile quick --backend cpu --op 'bias_add*' --op 'resize*' --op 'scatter*' --op unsorted_segment_sum --op maxpool2d_bwd --op 'crop_and_resize*')
(ulimit -f 200; "$D9M" run "${FULL[@]}" -n 50 --threads 1 -q --db "$T/full.sqlite" 2> "$T/err"); check "disk full" 3 $? "$T/err" "cannot store case .*: cannot be (read or written|written)"
"$D9M" verify --db "$T/full.sqlite" > "$T/v"; check "verify after a full disk" 0 $? "$T/v" "interrupted"
KEPT=$(q "import sqlite3; print(sqlite3.connect('$T/full.sqlite').execute('select count(*) from case_runs').fetchone()[0])")
"$D9M" run "${FULL[@]}" -n 50 --threads 1 -q --resume --db "$T/full.sqlite" 2> "$T/err"; check "resume after a full disk" 0 $? "$T/err" "resumed run"
q "
import sqlite3
db = sqlite3.connect('$T/full.sqlite')
assert db.execute('select state, resumes from runs').fetchall() == [('complete', 1)]
assert 0 < $KEPT < db.execute('select count(*) from case_runs').fetchone()[0], 'the full disk came before the first case or after the last'
assert db.execute('select count(*) from trials').fetchone()[0] == 50 * db.execute(\"select count(*) from case_runs where status in ('DETERMINISTIC', 'NONDETERMINISTIC')\").fetchone()[0]
assert db.execute(\"select count(*) from case_runs where status not in ('DETERMINISTIC', 'NONDETERMINISTIC', 'UNSUPPORTED')\").fetchone()[0] == 0
"; check "the resumed run is whole" 0 $?
# --- Ctrl-C (SIGINT) mid-run: exit 130, the run interrupted, its worker process gone, resumable -
q "
import sqlite3, subprocess, sys, time, os, signal
db = '$T/int.sqlite'
p = subprocess.Popen(['$D9M', 'run', '--backend', 'cpu', '-n', '300', '--threads', '1', '-q', '--db', db],
                     stdout=subprocess.DEVNULL, stderr=open('$T/int.err', 'w'))
def stored():
    try:
        c = sqlite3.connect(f'file:{db}?mode=ro', uri=True, timeout=0.05); n = c.execute('select count(*) from case_runs').fetchone()[0]; c.close(); return n
    except sqlite3.Error:
        return -1
while p.poll() is None and stored() < 3:
    time.sleep(0.01)
workers = subprocess.run(['pgrep', '-f', f'_worker .*--parent {p.pid}'], capture_output=True, text=True).stdout.split()
assert workers, 'no worker process while the run was running'
p.send_signal(signal.SIGINT)
assert p.wait(timeout=60) == 130, p.returncode
time.sleep(0.2)
alive = [w for w in workers if os.path.exists(f'/proc/{w}') and 'Z' not in open(f'/proc/{w}/stat').read().split()[2]]
assert not alive, f'worker {alive} outlived the run'
assert sqlite3.connect(db).execute('select state from runs').fetchall() == [('interrupted',)]
"; check "SIGINT: exit 130, interrupted, no worker left" 0 $?
grep -q "d9m run --resume" "$T/int.err"; check "SIGINT: the message says how to resume" 0 $?

# --- the worker's first message: the catalogue it was started for, with the run's digest ----------
# (`d9m run` starts its worker before it has loaded the catalogue; a built-in profile the worker
# parses itself, and it must still refuse any catalogue whose digest is not the run's.)
worker_first() {  # worker_first NAME PATTERN MESSAGE [--profile P]: the worker answers fatal, exit 3
  printf '%s\n' "$3" > "$T/first"
  "$D9M" _worker --threads 1 "${@:4}" --parent $$ < "$T/first" > "$T/wout" 2> "$T/werr"
  check "worker: $1" 3 $? "$T/wout" "$2"
}
worker_first "a built-in profile with another digest" '"fatal":"<quick catalogue>: the worker has a catalogue of SHA-256 [0-9a-f]{64}, the run.s is 00' \
  '{"digest": "0000", "builtin": "quick"}' --profile quick
worker_first "a profile it was not started for" 'asked for the built-in profile \\"default\\", started for \\"quick\\"' \
  '{"digest": "0000", "builtin": "default"}' --profile quick
worker_first "a profile when started for none" 'asked for the built-in profile \\"quick\\", started for \\"\\"' '{"digest": "0000", "builtin": "quick"}'
worker_first "an unknown profile, as usage" '"category":"usage","fatal":"--profile: unknown profile' '{"digest": "0000", "builtin": "fast"}' --profile fast
worker_first "a catalogue text with another digest" 'the run.s is 00' \
  '{"digest": "0000", "catalog_text": "{\"schema\": \"d9m.catalog/1\", \"configs\": [{\"op\": \"bias_add\", \"name\": \"x\", \"params\": {\"n\": 1, \"h\": 2, \"w\": 2, \"c\": 1}}]}", "source": "t.json"}'
worker_first "no digest" 'the first message is not the catalogue' '{"builtin": "quick"}' --profile quick

# --- batch invariance and autotune choices through worker processes (the default isolation) ----
cat > "$T/bi.json" << 'EOF2'
{"schema": "d9m.catalog/1", "configs": [{"op": "matmul", "name": "bi", "params": {"m": 16, "n": 8, "k": 2048},
  "variants": ["cpu.serial", "cpu.splitk_by_shape", "cpu.autotune"], "batch_invariance": {"sizes": [1, 5]}}]}
EOF2
"$D9M" run --catalog "$T/bi.json" --no-canaries -n 4 --db "$T/bi.sqlite" > "$T/bi.md" 2> "$T/err"; check "batch invariance run" 0 $? "$T/err" "cases into"
grep -q "| S1 batch |" "$T/bi.md"; check "batch invariance: the table has its column" 0 $?
"$D9M" report --db "$T/bi.sqlite" --format json -o "$T/bi.json.out"; check "batch invariance report" 0 $?
q "
import json
r = {x['variant']: x for x in json.load(open('$T/bi.json.out'))['results']}
assert r['cpu.serial']['invariance']['status'] == 'Supported', r['cpu.serial']['invariance']
assert r['cpu.splitk_by_shape']['invariance']['status'] == 'Replay only', r['cpu.splitk_by_shape']['invariance']
assert r['cpu.splitk_by_shape']['invariance']['sizes'] == [1, 5]
assert sum(c['trials'] for c in r['cpu.autotune']['autotune']['choices']) == 4, r['cpu.autotune']
"; check "batch invariance and choices cross the worker pipe" 0 $?
"$D9M" verify --db "$T/bi.sqlite" > "$T/v"; check "batch invariance store verifies" 0 $? "$T/v" ": OK"

# --- library versions: cached in the store, the fingerprint the same as loading them gives -------
# (A CUDA build: cuBLAS and cuSPARSE are loaded only to read their versions, unless the store's
# cache answers; LD_DEBUG=files shows the initialisers of every library the loader maps.)
"$D9M" fingerprint --json > "$T/fp.json"
if q "import json,sys; sys.exit(0 if (json.load(open('$T/fp.json'))['fingerprint'].get('cuda') or {}).get('cublas_loaded') else 1)"; then
  one=(run --backend cpu --op bias_add --variant cpu.serial --profile quick --no-canaries -n 2 --db "$T/lib.sqlite")
  fp_id() { q "import json; print(json.load(open('$T/fp.json'))['id'])"; }
  run_fps() { q "import sqlite3; print(' '.join(r[0] for r in sqlite3.connect('$T/lib.sqlite').execute('select distinct fingerprint_id from runs')))"; }
  LD_DEBUG=files "$D9M" "${one[@]}" > /dev/null 2> "$T/ld1"; check "library versions: first run" 0 $?
  grep -q 'calling init: .*/libcublas\.so' "$T/ld1"; check "library versions: an empty cache loads cuBLAS" 0 $?
  [[ $(q "import sqlite3; print(sqlite3.connect('$T/lib.sqlite').execute('select count(*) from library_versions').fetchone()[0])") == 2 ]]
  check "library versions: cuBLAS and cuSPARSE cached" 0 $?
  LD_DEBUG=files "$D9M" "${one[@]}" > /dev/null 2> "$T/ld2"; check "library versions: second run" 0 $?
  ! grep -qE 'calling init: .*/libcu(blas|blasLt|sparse)\.so' "$T/ld2"; check "library versions: the cache answers, nothing loaded" 0 $? "$T/ld2" .
  [[ $(run_fps) == "$(fp_id)" ]]; check "library versions: both runs under the fingerprint that loading gives" 0 $?
  q "import sqlite3; c = sqlite3.connect('$T/lib.sqlite'); c.execute(\"update library_versions set entry = replace(entry, '\\\"path\\\":\\\"', '\\\"path\\\":\\\"/nowhere')\"); c.commit()"
  LD_DEBUG=files "$D9M" "${one[@]}" > /dev/null 2> "$T/ld3"; check "library versions: run after an edit" 0 $?
  grep -q 'calling init: .*/libcublas\.so' "$T/ld3"; check "library versions: an entry naming another file is no answer" 0 $?
  [[ $(run_fps) == "$(fp_id)" ]]; check "library versions: the same fingerprint after the edit" 0 $?
  "$D9M" verify --db "$T/lib.sqlite" > "$T/v"; check "library versions: the store verifies" 0 $? "$T/v" ": OK"
fi

# --- WAL on a network file system is refused (only where the test machine has one mounted) ----
nfs=$(awk '$3 ~ /^(nfs|nfs4|cifs|smb3)$/ {print $2; exit}' /proc/mounts)
if [[ -n $nfs && -w $nfs ]]; then
  "$D9M" run "${SMALL[@]}" -n 2 --db "$nfs/d9m-test-$$.sqlite" 2> "$T/err"; check "network file system" 3 $? "$T/err" "network file system"
fi

checks_done
