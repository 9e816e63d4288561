#!/usr/bin/env bash
# Hostile and mistaken inputs and output paths, end to end (issue 11): every one gets a clear
# error with the exit code of DESIGN.md, and nothing is lost: no crash, no store created or
# migrated for a run that cannot write its outputs, no file written through a planted symlink.
# Usage: inputs_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T=$(mktemp -d)
trap 'chmod -R u+rwx "$T" 2> /dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
passes=0

# expect NAME RC PATTERN CMD...: runs CMD with its stdout and stderr in $T/said; it must exit RC
# and say something matching PATTERN (grep -E; "" when it needs to say nothing).
expect() {
  local name=$1 rc=$2 pattern=$3
  shift 3
  "$@" > "$T/said" 2>&1
  local got=$?
  if [[ $got == "$rc" ]] && { [[ -z $pattern ]] || grep -qE -- "$pattern" "$T/said"; }; then
    passes=$((passes + 1))
  else
    echo "FAIL: $name: exit $got (expected $rc and /$pattern/), it said:"
    head -c 2000 "$T/said" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
# holds NAME TEST...: a condition on what is on disk afterwards.
holds() {
  local name=$1
  shift
  if "$@"; then passes=$((passes + 1)); else echo "FAIL: $name"; failures=$((failures + 1)); fi
}
same() { [[ $(sha256sum < "$1") == $(sha256sum < "$2") ]]; }
no_temporaries() { [[ -z $(find "$T" -name '.*.d9m-*') ]]; }

ONE=(--backend cpu --op bias_add_grad --config nhwc_8x16x16x32 -n 2 -q)
"$D9M" run "${ONE[@]}" --db a.sqlite 2> /dev/null || { echo "FAIL: cannot make the test store"; exit 1; }
"$D9M" report --db a.sqlite --format json -o a.json || exit 1
echo precious > victim.orig
cp victim.orig victim

# --- 12: outputs never follow a planted temporary name --------------------------------------
# d9m once wrote "<out>.tmp" and renamed it: a symlink planted there sent the output into any file.
plant() { rm -f "$1.tmp"; ln -s "$T/victim" "$1.tmp"; }
plant r.md; expect "report -o, planted .tmp" 0 "" "$D9M" report --db a.sqlite -o r.md
plant b.json; expect "baseline pin -o, planted .tmp" 0 "" "$D9M" baseline pin --db a.sqlite -o b.json
plant d.md; expect "diff -o, planted .tmp" 0 "" "$D9M" diff a.sqlite a.sqlite -o d.md
plant att.json; expect "attest -o, planted .tmp" 0 "" "$D9M" attest --db a.sqlite --report a.json -o att.json
base=so/bias_add_grad/nhwc_8x16x16x32
mkdir -p "$base/inputs"
for f in "$base/config.json" "$base/inputs/out_backprop.npy" "$base/cpu.serial.npy"; do plant "$f"; done
expect "run --save-outputs, planted .tmp" 0 "cases into" "$D9M" run "${ONE[@]}" --db a.sqlite --save-outputs so
holds "no output went through a planted symlink" same victim victim.orig
holds "the outputs are files of their own" test -s r.md -a ! -L r.md -a -s b.json -a -s d.md -a -s att.json -a -s "$base/cpu.serial.npy"
holds "the planted links are left as they were" test "$(readlink r.md.tmp)" = "$T/victim"
holds "no temporary left behind" no_temporaries
# -o naming a symlink replaces the link, not the file it points to.
cp victim.orig victim
ln -s "$T/victim" link.md
expect "report -o a symlink" 0 "" "$D9M" report --db a.sqlite -o link.md
holds "the symlink's target is untouched" same victim victim.orig
holds "the link became the report" test -f link.md -a ! -L link.md

# --- 9: a --save-outputs that cannot be written is refused before the store is touched ------
# It used to exit 3 only after the store was created, or migrated with a backup left beside it.
cp "$SRC/suites/store/v1-store.sqlite" old.sqlite
cp old.sqlite old.orig
touch afile
expect "save-outputs under a file, new store" 3 "afile/x: cannot create folder: .*afile is a file, not a folder" \
  "$D9M" run "${ONE[@]}" --db new.sqlite --save-outputs afile/x
holds "no store was created" test ! -e new.sqlite -a ! -e new.sqlite-wal
expect "save-outputs under a file, schema-1 store" 3 "afile/x: cannot create folder" \
  "$D9M" run "${ONE[@]}" --db old.sqlite --save-outputs afile/x
holds "the old store is unchanged" same old.sqlite old.orig
holds "no migration backup" test -z "$(ls old.sqlite.* 2> /dev/null)"
mkdir -p deep/bias_add_grad/nhwc_8x16x16x32/cpu.ordered.npy
expect "save-outputs where a variant's .npy is a folder" 3 "cpu.ordered.npy: is a folder, not a file to write" \
  "$D9M" run "${ONE[@]}" --db old.sqlite --save-outputs deep
mkdir -p deep2/unsorted_segment_sum && touch deep2/unsorted_segment_sum/_canary
expect "save-outputs where a control's folder is a file" 3 "_canary is a file, not a folder" \
  "$D9M" run "${ONE[@]}" --db old.sqlite --save-outputs deep2
expect "save-outputs in /proc" 3 "/proc/d9m-out: cannot write in folder /proc" \
  "$D9M" run "${ONE[@]}" --db old.sqlite --save-outputs /proc/d9m-out
# A symbolic link planted inside the outputs tree would send the files elsewhere: refused.
mkdir -p linked elsewhere && ln -s "$T/elsewhere" linked/bias_add_grad
expect "save-outputs through a link planted in the tree" 3 "linked/bias_add_grad: is a symbolic link inside the output folder" \
  "$D9M" run "${ONE[@]}" --db old.sqlite --save-outputs linked
holds "nothing written where the link points" test -z "$(ls elsewhere)"
holds "the old store is still unchanged" same old.sqlite old.orig
holds "still no migration backup" test -z "$(ls old.sqlite.* 2> /dev/null)"
if [[ $(id -u) != 0 ]]; then  # root writes into a read-only folder anyway
  mkdir ro && chmod 555 ro
  expect "save-outputs in a read-only folder" 3 "cannot write in folder ro" "$D9M" run "${ONE[@]}" --db old.sqlite --save-outputs ro/x
  holds "the old store is unchanged by a read-only folder" same old.sqlite old.orig
fi

# -o is checked before a verb does its work.
mkdir adir
expect "report -o a folder" 3 "adir: is a folder, not a file to write" "$D9M" report --db a.sqlite -o adir
expect "baseline pin -o in a missing folder" 3 "nodir/b.json: cannot write: folder nodir \(No such file" \
  "$D9M" baseline pin --db a.sqlite -o nodir/b.json

# --- 13: config names are one path component: "." and ".." are refused -----------------------
# With --save-outputs, "." wrote a config's files into its op's folder, ".." into the outputs
# folder itself, where the configs of two ops overwrote each other.
cfg() { printf '{"op": "%s", "name": "%s", "params": {"n": 1, "h": 2, "w": 2, "c": 1}}' "$@"; }
echo "{\"schema\": \"d9m.catalog/1\", \"configs\": [$(cfg bias_add ..), $(cfg bias_add_grad ..)]}" > dots.json
expect "config name .." 2 'dots.json: configs\[0\]\.name: .*not starting with .\.., got "\.\."' \
  "$D9M" run --catalog dots.json --backend cpu -n 2 -q --db dots.sqlite --save-outputs dots
echo "{\"schema\": \"d9m.catalog/1\", \"configs\": [$(cfg bias_add .)]}" > dot.json
expect "config name ." 2 'dot.json: configs\[0\]\.name: .*got "\."' "$D9M" list --catalog dot.json
holds "nothing written for bad names" test ! -e dots.sqlite -a ! -e dots

# --- 14: catalogues read with limits: depth, size, file type ---------------------------------
python3 -c "
import sys
deep = '[' * 100000 + ']' * 100000
sys.stdout.write('{\"schema\": \"d9m.catalog/1\", \"description\": ' + deep + ', \"configs\": [$(cfg bias_add x)]}')" > deep.json
expect "list, 100,000 levels deep" 2 "deep.json:1:107: nested more than 64 levels deep" "$D9M" list --catalog deep.json
expect "run, 100,000 levels deep" 2 "deep.json:1:107: nested more than 64 levels deep" \
  "$D9M" run --catalog deep.json --backend cpu -n 2 --db deep.sqlite
expect "/dev/zero as a catalogue" 2 "/dev/zero: larger than the limit of 64 MiB for a catalogue" \
  timeout 60 "$D9M" run --catalog /dev/zero --backend cpu -n 2 --db deep.sqlite
expect "a folder as a catalogue" 2 "adir: is a folder, not a catalogue file" "$D9M" list --catalog adir
head -c $((64 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' > huge.json
expect "a catalogue over 64 MiB" 2 "huge.json: 67108865 bytes, larger than the limit of 64 MiB for a catalogue" \
  "$D9M" list --catalog huge.json
rm huge.json
holds "no store for a bad catalogue" test ! -e deep.sqlite
echo "{\"schema\": \"d9m.catalog/1\", \"configs\": [$(cfg bias_add piped)]}" > piped.json
expect "a catalogue through a pipe" 0 "configs: piped" "$D9M" list --catalog <(cat piped.json)
# The worker processes get the bytes the run parsed, not the path: a pipe is read once (every case
# was an ERROR, the workers finding it drained).
expect "a run of a catalogue through a pipe" 0 "PASS: every claim held" "$D9M" run --catalog <(cat piped.json) --backend cpu -n 2 --db piped.sqlite

# --- 15: a baseline that is malformed or checks nothing fails ---------------------------------
"$D9M" baseline pin --db a.sqlite -o base.json || exit 1
python3 -c "
import json
b = json.load(open('base.json'))
def edited(name, f):
    c = json.loads(json.dumps(b)); f(c); json.dump(c, open(name, 'w'))
edited('numeric.json', lambda c: c['stacks'][0]['cases'][0].update(digest=5))
edited('nostacks.json', lambda c: c.update(stacks=[]))
edited('nocases.json', lambda c: c['stacks'][0].update(cases=[]))
edited('othercat.json', lambda c: [x.update(case_id='%064x' % i) for i, x in enumerate(c['stacks'][0]['cases']) if not x['config'].startswith('_')])
edited('malformed.json', lambda c: c.update(stacks=[1, 2]))
edited('onemissing.json', lambda c: next(x for x in c['stacks'][0]['cases'] if not x['config'].startswith('_')).update(case_id='%064x' % 7))"
expect "baseline, numeric digest" 2 "numeric.json: stacks\[0\]\.cases\[0\]\.digest: expected 32 lowercase hex digits, got an integer" \
  "$D9M" baseline check --db a.sqlite numeric.json
expect "baseline with no stacks" 2 "nostacks.json: stacks: the baseline pins no case" "$D9M" baseline check --db a.sqlite nostacks.json
expect "baseline with no cases" 2 "nocases.json: stacks: the baseline pins no case" "$D9M" baseline check --db a.sqlite nocases.json
expect "baseline of another catalogue" 2 "othercat.json: nothing checked: none of the [0-9]+ cases it pins" \
  "$D9M" baseline check --db a.sqlite othercat.json
expect "malformed baseline" 2 "malformed.json: stacks\[0\]: expected an object, got an integer" "$D9M" baseline check --db a.sqlite malformed.json
expect "a folder as a baseline" 2 "adir: is a folder, not a baseline file" "$D9M" baseline check --db a.sqlite adir
expect "/dev/zero as a baseline" 2 "/dev/zero: larger than the limit of 64 MiB for a baseline" timeout 60 "$D9M" baseline check --db a.sqlite /dev/zero
OMP_NUM_THREADS=3 "$D9M" run "${ONE[@]}" --db other-stack.sqlite 2> /dev/null  # another stack: an env var in the fingerprint
expect "baseline of another stack" 2 "base.json: nothing checked: .*pinned on stacks [0-9a-f]{12}; the store has S1 [0-9a-f]{12}" \
  "$D9M" baseline check --db other-stack.sqlite base.json
expect "the baseline checks its own store" 0 " 0 drifted, 0 missing" "$D9M" baseline check --db a.sqlite base.json
# A pinned case the store no longer holds is evidence that did not come back: it fails (it passed).
expect "a pinned case missing from the store" 1 "0 drifted, 1 missing" "$D9M" baseline check --db a.sqlite onemissing.json
"$D9M" run --backend cpu --op bias_add_grad --variant cpu.atomic -n 2 -q --db atomic.sqlite 2> /dev/null
expect "pin with nothing to pin" 2 "atomic.sqlite: no case claimed deterministic gave one digest" \
  "$D9M" baseline pin --db atomic.sqlite -o empty.json
holds "no baseline written when there is nothing to pin" test ! -e empty.json

# --- 16: integers, tolerances, a full disk --------------------------------------------------
# cuDNN's descriptors take int: 2^31 was accepted and wrapped there.
printf '{"schema": "d9m.catalog/1", "configs": [{"op": "conv2d_bwd_filter", "name": "x", "params": {"n": 1, "h": 4, "w": 4, "ci": 1, "co": 1, "kh": 1, "kw": 1, "stride_h": 2147483648}}]}' > int.json
expect "an integer of 2^31" 2 "int.json: configs\[0\]\.params\.stride_h: expected an integer in \[1, 2\^31-1\], got 2147483648" \
  "$D9M" list --catalog int.json
for tol in nan -1 inf; do
  expect "--timing-tolerance $tol" 2 "--timing-tolerance must be a finite number of at least 0.*got $tol" \
    "$D9M" diff a.sqlite a.sqlite --timing-tolerance=$tol
done
# A full disk says so (it said "disk I/O error"). A file size limit stands in everywhere; a small
# tmpfs, where this machine lets us mount one in a private mount namespace, is the real thing.
expect "a file size limit" 3 "cannot store case .*: cannot be written: the file reached the largest size allowed to this process \(File too large; see ulimit -f\)" \
  bash -c 'ulimit -f 200; exec "$0" run --backend cpu -n 50 --threads 1 -q --db limited.sqlite' "$D9M"
mkdir full
unshare=(unshare -m)
[[ $(id -u) == 0 ]] || unshare=(unshare -rm)
if "${unshare[@]}" mount -t tmpfs -o size=8k tmpfs full 2> /dev/null; then
  # Out of space while creating the store (every size around where the schema stops fitting: a
  # store whose schema reached only its log was once linked into place, corrupt), and while
  # storing cases. Whatever is left on the tmpfs must be a store that verifies, or nothing.
  for size in 8k 40k 96k 120k 140k 160k 180k 400k; do
    expect "a full disk ($size)" 3 ": cannot (create the store|store case .*): cannot be written: the disk is full \(No space left on device\)" \
      "${unshare[@]}" bash -c "mount -t tmpfs -o size=$size tmpfs full && '$D9M' run --backend cpu -n 50 --threads 1 -q --db full/d9m.sqlite;
        rc=\$?; if [[ -e full/d9m.sqlite ]] && ! '$D9M' verify --db full/d9m.sqlite > /dev/null; then echo 'a store left behind does not verify'; exit 99; fi; exit \$rc"
  done
else
  echo "note: no tmpfs can be mounted here; a full disk is checked through the file size limit only"
fi

# d9m exec: a trial's output is what that trial wrote (found by review). A program that writes
# random bytes only when its output is absent (a cache) gave D: the second trial wrote nothing and
# its predecessor's file, within 10 ms, passed as its own. Trials are now kept 20 ms apart, more
# than a file system's clock tick: one it does not write is refused.
printf '[ -e cache.bin ] || head -c 64 /dev/urandom > cache.bin\n' > cache.sh
rm -f cache.bin
expect "exec: a cached output is not the trial's own" 2 "trial 1: output cache\.bin was not written by this trial" \
  "$D9M" exec -n 3 --db exec.sqlite --outputs cache.bin -- sh cache.sh
# A cached copy moved into place keeps its time, a moment before the trial (found by review: D).
printf 'if [ -e c.bin ]; then mv c.bin moved.bin; else head -c 16 /dev/urandom > moved.bin; cp moved.bin c.bin; fi\n' > moved.sh
rm -f c.bin moved.bin
expect "exec: a cached copy moved into place is not the trial's own" 2 "trial 1: output moved\.bin was not written by this trial" \
  "$D9M" exec -n 2 --db exec.sqlite --outputs moved.bin -- sh moved.sh
# ...nor a stale output whose time lies in the future, after every trial (found by audit: D).
echo stale > future.bin && touch -d '+1 hour' future.bin
expect "exec: an output modified after the trial ended" 2 "trial 0: output future\.bin was not written by this trial \(modified after it ended" \
  "$D9M" exec -n 3 --db exec.sqlite --outputs future.bin -- true
# The name becomes the op in every report: one path component's characters (found by audit: a '|'
# and a newline moved Markdown cells under another stack's column).
expect "exec: --name with a '|' and a newline" 2 "exec: --name .* must be 1 to 100 of" \
  "$D9M" exec -n 2 --db exec.sqlite --name $'a|b\nc' --outputs results.csv -- sh -c 'echo 1 > results.csv'
# An output's header must describe its bytes (found by audit: a .npy shape whose element count
# wrapped past 2^64 matched 8 bytes, and a .safetensors shape was never checked).
cat > badshape.py << 'PY'
import json, struct, sys
if sys.argv[1] == "npy":
    h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,27,19,43,5419,77158673929), }"
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    open("wrap.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + b"\0" * 8)
else:
    h = json.dumps({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}).encode()
    open("lies.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * 16)
PY
expect "exec: a .npy shape that overflows" 2 "wrap\.npy.*(overflows|header says)" \
  "$D9M" exec -n 2 --db badshape.sqlite --outputs wrap.npy -- python3 badshape.py npy
expect "exec: a .safetensors shape that is not its bytes" 2 "tensor \"a\" holds 16 bytes, its shape and dtype say 3 x 4" \
  "$D9M" exec -n 2 --db badshape.sqlite --outputs lies.safetensors -- python3 badshape.py st
holds "nothing was stored for a bad header" test ! -e badshape.sqlite
# Raw bytes differ by what their values differ (found by audit: "first" against "later" was
# stored as 5 elements differing by 0): |'s' - 'e'| = 14, and as many ULPs.
rm -f raw.sqlite
expect "exec: a raw output that differs" 1 "^ND 2/2 word\.txt" \
  "$D9M" exec -n 2 --db raw.sqlite --outputs word.txt -- sh -c '[ "$D9M_TRIAL" = 0 ] && echo first > word.txt || echo later > word.txt'
holds "raw bytes' diff: 5 elements, max abs 14, 14 ULPs" test "$(python3 -c "import sqlite3; print(sqlite3.connect('raw.sqlite').execute('select diff_count, diff_max_abs, diff_max_ulp from trials where diff_count is not null').fetchone())")" = "(5, 14.0, 14)"
# A trace row's numbers fit the store's signed integers and its names hold no control characters
# (found by audit: a step of 2^63 left a run begun and never ended, exit 3; a NUL went raw into
# `trace diff`): refused as bad input, nothing stored.
rm -f tr.sqlite
echo 'cp "$(dirname "$0")/row.jsonl" "$D9M_TRACE"' > tr.sh
for row in '"step": 9223372036854775808, "position": 0, "name": "n"' '"step": 0, "position": 0, "name": "a\u0000b"'; do
  echo "{$row, \"op\": \"o\", \"variant\": \"v\", \"digest\": \"00000000000000000000000000000000\", \"inputs\": []}" > row.jsonl
  expect "exec: a trace row with $row" 2 "trace, line 1: (expected a non-negative integer \"step\" below 2\^63|\"name\" holds a control character); nothing was stored" \
    "$D9M" exec -n 2 --db tr.sqlite -- sh "$PWD/tr.sh"
done
holds "nothing was stored for a bad trace" test ! -e tr.sqlite
expect "run --timeout nan" 2 "--timeout: not a number" "$D9M" run --backend cpu --op bias_add -n 2 --timeout nan --db tr.sqlite
# A trial that does not end: --timeout kills it with its children; a SIGTERM to d9m ends the
# trial's process group and removes its trace file (found by audit: the program ran on, and
# /tmp/d9m-trace-* stayed).
# (The program's child, a sleep, writes its pid: it must be gone after, or a zombie where this
# machine's init does not reap orphans.)
alive() { local st; st=$(ps -o stat= -p "$(cat "$1")" 2> /dev/null); [[ -n $st && $st != Z* ]]; }
printf 'echo "$D9M_TRACE" > trace.path\nsleep 300 &\necho $! > sleeper.pid\nwait\n' > hang.sh
rm -f sleeper.pid
expect "exec --timeout" 2 "did not end within 0\\.5 s \\(--timeout\\); it was killed" \
  "$D9M" exec -n 2 --timeout 0.5 --db hang.sqlite -- sh hang.sh
holds "a trial past --timeout leaves no process" bash -c "$(declare -f alive); ! alive sleeper.pid"
rm -f sleeper.pid
"$D9M" exec -n 2 --db hang.sqlite -- sh hang.sh > /dev/null 2>&1 &
exec_pid=$!
for _ in $(seq 50); do [[ -s sleeper.pid ]] && break; sleep 0.1; done
kill -TERM $exec_pid; wait $exec_pid
holds "SIGTERM ends d9m exec with its signal" test $? = 143
sleep 0.2
holds "SIGTERM to d9m exec leaves no process" bash -c "$(declare -f alive); ! alive sleeper.pid"
# (This trial's own trace file, by the name d9m gave it: found by a fresh-clone run, counting every
# /tmp/d9m-trace-* met the files of tests running beside this one.)
holds "SIGTERM to d9m exec leaves no trace file" bash -c '[[ $(cat trace.path) == /tmp/d9m-trace-* && ! -e $(cat trace.path) ]]'
holds "nothing was stored for a trial that did not end" test ! -e hang.sqlite
# ...and d9m never removes or rewrites a file (found by review of an earlier fix, which removed
# the outputs between trials: a results file the user had, appended to by the program, was lost).
printf 'old,precious,data\n' > results.csv
expect "exec: a file appended to by each trial" 1 "^ND 2/2 results\.csv" "$D9M" exec -n 2 --db exec.sqlite --outputs results.csv -- sh -c 'echo result,42 >> results.csv'
[[ $(head -1 results.csv) == old,precious,data ]] || { echo "FAIL: exec lost the user's results.csv"; failures=$((failures + 1)); }
# Every trial reads the same standard input (found by review: the trials inherited d9m's, so the
# first read a file or pipe to its end and the later ones read nothing: ND for a deterministic
# program). A file is read by each trial from where it stood; a pipe cannot be replayed, and each
# trial reads nothing.
printf 'first\nsecond\nthird\n' > lines.txt
READ_ONE=(sh -c 'read x; echo "[$x]" > line.txt')
expect "exec: every trial reads the same file on stdin" 0 "^D +line\.txt" "$D9M" exec -n 3 --db exec.sqlite --outputs line.txt -- "${READ_ONE[@]}" < lines.txt
holds "exec: a trial read stdin's file from its start" test "$(cat line.txt)" = "[first]"
{ read -r _; expect "exec: from where d9m's stdin stood" 0 "^D +line\.txt" "$D9M" exec -n 2 --db exec.sqlite --outputs line.txt -- "${READ_ONE[@]}"; } < lines.txt
holds "exec: a trial read stdin's file from where it stood" test "$(cat line.txt)" = "[second]"
expect "exec: a pipe on stdin is read by no trial" 0 "^D +line\.txt" "$D9M" exec -n 3 --db exec.sqlite --outputs line.txt -- "${READ_ONE[@]}" < <(cat lines.txt)
holds "exec: a trial read nothing from a pipe" test "$(cat line.txt)" = "[]"
# ...and where d9m's own stdin is closed, /dev/null all the same (found by review: the trial had
# no stdin at all).
expect "exec: a closed stdin" 0 "^D +fd\.txt" "$D9M" exec -n 2 --db exec.sqlite --outputs fd.txt -- sh -c 'readlink /proc/self/fd/0 > fd.txt || echo closed > fd.txt' <&-
holds "exec: a trial's stdin is /dev/null where d9m's was closed" test "$(cat fd.txt)" = /dev/null
# A .npy whose header changes with the same data bytes (only the data is digested) gave D.
cat > header.py << 'PY'
import os, struct
t = int(os.environ["D9M_TRIAL"])
h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (("<f4", "(4,)") if t == 0 else ("<i4", "(2, 2)"))
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open("header.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<4f", 1, 2, 3, 4))
PY
expect "exec: a .npy header that changes" 2 "trial 1: output header\.npy is i4 \[2,2\], trial 0's was f4 \[4\]; nothing was stored" \
  "$D9M" exec -n 2 --db exec.sqlite --outputs header.npy -- python3 header.py

# --- --save-outputs into a folder of another config (found by review) ------------------------------
# Another catalogue's config of the same op and name (here at f16) would have overwritten some
# files and left the rest beside a config.json that no longer described them.
printf '{"schema":"d9m.catalog/1","configs":[{"op":"bias_add_grad","name":"x","params":{"n":2,"h":3,"w":4,"c":5},"variants":["cpu.serial","cpu.ordered"]}]}' > xa.json
sed 's/"params"/"dtype":"f16","params"/' xa.json > xb.json
expect "save-outputs of a config" 0 "" "$D9M" run --backend cpu --catalog xa.json -n 2 -q --no-canaries --db xa.sqlite --save-outputs sx
expect "save-outputs of the same config again" 0 "" "$D9M" run --backend cpu --catalog xa.json -n 2 -q --no-canaries --db xa.sqlite --save-outputs sx
expect "save-outputs of another config of the same name" 2 "sx/bias_add_grad/x/config.json: the saved outputs there are of another config .*, f32; this run's is .*, f16" \
  "$D9M" run --backend cpu --catalog xb.json -n 2 -q --no-canaries --db xb.sqlite --save-outputs sx
holds "nothing was stored" test ! -e xb.sqlite
holds "the saved config is the first one's" grep -q '"dtype": "f32"' sx/bias_add_grad/x/config.json

# --- merge -o: what OUT names (found by review) ---------------------------------------------------
"$D9M" run "${ONE[@]}" --db m1.sqlite 2> /dev/null
cp m1.sqlite keep.sqlite && chmod 600 keep.sqlite
expect "merge into an existing store" 0 "" "$D9M" merge -o keep.sqlite a.sqlite
holds "merge keeps OUT's permissions" test "$(stat -c %a keep.sqlite)" = 600
cp m1.sqlite m1.orig
expect "merge -o another store's log" 2 "m1.sqlite-wal: names a side file of the store m1.sqlite" "$D9M" merge -o m1.sqlite-wal a.sqlite
holds "no store at the log's name" test ! -e m1.sqlite-wal
ln -s nothere.sqlite dangling.sqlite
expect "merge -o a dangling link" 3 "dangling.sqlite: a symbolic link to a file or folder that does not exist; nothing was written" \
  "$D9M" merge -o dangling.sqlite a.sqlite
mkdir -p afolder.sqlite
expect "merge -o a folder" 3 "afolder.sqlite: is a folder, not a store" "$D9M" merge -o afolder.sqlite a.sqlite

echo "$passes passed, $failures failed"
[[ $failures == 0 ]]
