#!/usr/bin/env bash
# The HTML report as a person sees it: self-contained (nothing loaded from outside), opened in
# headless Chromium from file://, and the screenshot must show the status heatmap's cells (its
# green D and red ND colours) and the case table the script builds on. Skips (exit 77) when
# Chromium is not installed.
# Usage: html_test.sh path/to/d9m
set -u
D9M=$(realpath "$1")
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n $browser ]] || { echo "chromium not installed: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$D9M" run --backend cpu --op 'scatter*' --op 'bias_add*' -n 3 --db "$T/s.sqlite" -q 2> /dev/null || { echo "FAIL: run"; exit 1; }
# Whether cpu.atomic diverges in 3 trials is the scheduler's business; the picture must show an
# ND cell whatever it decided, so one is planted: a trial digest of one atomic case rewritten.
python3 - "$T/s.sqlite" <<'PY' || { echo "FAIL: planting a divergence"; exit 1; }
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
case = c.execute("SELECT k.id FROM cases k WHERE k.variant = 'cpu.atomic' AND k.op = 'scatter_add' LIMIT 1").fetchone()[0]
c.execute("UPDATE trials SET digest = '00000000000000000000000000000001' WHERE case_id = ? AND trial = 1", (case,))
c.commit()
PY
# (--no-verify: the planted digest is an edit, which a plain report refuses.)
"$D9M" report --db "$T/s.sqlite" --format html --no-verify -o "$T/r.html" || { echo "FAIL: report"; exit 1; }
# Self-contained: no URL, no src=, no href=, no @import.
if grep -nE 'https?://|src=|href=|@import|url\(' "$T/r.html"; then echo "FAIL: the HTML refers to something outside itself"; exit 1; fi
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1400 \
  --screenshot="$T/shot.png" "file://$T/r.html" > "$T/chromium.log" 2>&1
[[ -s $T/shot.png ]] || { echo "FAIL: no screenshot"; cat "$T/chromium.log"; exit 1; }
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$T/r.html" > "$T/dom.html" 2> /dev/null
python3 - "$T/shot.png" "$T/dom.html" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from png_colours import rows_of
w, h, bpp, rows = rows_of(sys.argv[1])
def count(rgb):
    return sum(1 for r in rows for x in range(0, w * bpp, bpp) if tuple(r[x:x + 3]) == rgb)
green, red = count((0x4a, 0xc2, 0x6b)), count((0xfa, 0x45, 0x49))
print(f'screenshot {w}x{h}: {green} pixels of D green, {red} of ND red')
assert green > 2000, 'no deterministic cells visible'
assert red > 500, 'no nondeterministic cells visible'
dom = open(sys.argv[2]).read()
assert dom.count('<tr') >= 20 and 'id="cases"' in dom, 'the case table did not render'
assert all('id="pick-' + k + '"' in dom for k in ('library', 'dtype', 'status')), 'the library, dtype and status filters are missing'
PY
rc=$?
[[ $rc == 0 ]] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $rc
