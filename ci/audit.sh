#!/usr/bin/env bash
# Audits this machine: installs what is missing (as root), builds d9m, runs every catalogued
# case on every available backend, and writes the store and the reports.
#   ci/audit.sh                       20 trials per case into out/
#   D9M_OUT=dir ci/audit.sh -n 200    any `d9m run` arguments pass through
# Writes: $OUT/d9m.sqlite (the evidence; re-running adds runs to it), $OUT/report.md and
# $OUT/report.json (every run in the store), $OUT/fingerprint.json, $OUT/audit.log.
# Exit code: that of `d9m run` (0 every claim held, 1 the verdict failed: a claim broke or a case has
# no evidence but ERROR; 2 bad usage, 3 environment).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# 20 trials per case unless the arguments name N (d9m refuses a repeated -n). The store is
# always $D9M_OUT/d9m.sqlite (default out/), which the reports below read: --db would split them.
default_trials=(-n 20)
for arg in "$@"; do
  case $arg in
    -n | --trials | -n[0-9]* | --trials=*) default_trials=() ;;
    --db | --db=*)
      echo "ci/audit.sh: the store is \$D9M_OUT/d9m.sqlite (now ${D9M_OUT:-out}/d9m.sqlite); set D9M_OUT instead of --db" >&2
      exit 2
      ;;
  esac
done
# D9M_AUDIT_PRINT=1: print the `d9m run` arguments this would use, and stop (its test uses it).
if [[ ${D9M_AUDIT_PRINT:-0} == 1 ]]; then
  echo run "${default_trials[@]}" --db "${D9M_OUT:-out}/d9m.sqlite" "$@"
  exit 0
fi
source ci/deps.sh
d9m_install_deps
build=${D9M_BUILD_DIR:-build/audit}
d9m_build "$build" -DCMAKE_BUILD_TYPE=Release -DD9M_TESTS=OFF > /dev/null
out=${D9M_OUT:-out}
mkdir -p "$out"
d9m=$build/harness/d9m
"$d9m" fingerprint --json > "$out/fingerprint.json"
set +e
"$d9m" run "${default_trials[@]}" --db "$out/d9m.sqlite" "$@" 2> >(tee "$out/audit.log" >&2)
rc=$?
set -e
if [[ -f $out/d9m.sqlite ]]; then
  "$d9m" report --db "$out/d9m.sqlite" --format md -o "$out/report.md" || true
  "$d9m" report --db "$out/d9m.sqlite" --format json -o "$out/report.json" || true
  "$d9m" verify --db "$out/d9m.sqlite" >> "$out/audit.log"
  echo "d9m: store $out/d9m.sqlite, reports $out/report.md and $out/report.json" >&2
fi
exit $rc
