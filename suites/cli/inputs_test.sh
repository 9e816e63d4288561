#!/usr/bin/env bash
# Hostile and mistaken inputs and output paths, end to end (issue 11): every one gets a clear
# error with the exit code of DESIGN.md, and nothing is lost: no crash, no store created or
# migrated for a run that cannot write its outputs, no file written through a planted symlink.
# Usage: inputs_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
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

echo "$passes passed, $failures failed"
[[ $failures == 0 ]]
