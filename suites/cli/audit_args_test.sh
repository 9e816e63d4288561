#!/usr/bin/env bash
# ci/audit.sh's arguments (README: `ci/audit.sh -n 200 --op 'scatter*'`): its default of 20
# trials gives way to the caller's N, since d9m refuses a repeated -n, and --db is refused
# because the reports read $D9M_OUT/d9m.sqlite. Checked without building, via D9M_AUDIT_PRINT.
set -uo pipefail
audit="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/ci/audit.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
args() { D9M_AUDIT_PRINT=1 D9M_OUT=o bash "$audit" "$@"; }

[[ $(args) == "run -n 20 --db o/d9m.sqlite" ]] || fail "default: $(args)"
[[ $(args -n 200 --op 'scatter*') == "run --db o/d9m.sqlite -n 200 --op scatter*" ]] || fail "-n 200: $(args -n 200 --op 'scatter*')"
[[ $(args --trials=7) == "run --db o/d9m.sqlite --trials=7" ]] || fail "--trials=7: $(args --trials=7)"
[[ $(args -n5) == "run --db o/d9m.sqlite -n5" ]] || fail "-n5: $(args -n5)"
[[ $(args --op n) == "run -n 20 --db o/d9m.sqlite --op n" ]] || fail "an argument that merely contains n: $(args --op n)"
err=$(args --db x.sqlite 2>&1 >/dev/null)
rc=$?
((rc == 2)) || fail "--db: exit $rc, not 2"
[[ $err == *"set D9M_OUT instead of --db"* ]] || fail "--db message: $err"
echo "audit.sh arguments: ok"
