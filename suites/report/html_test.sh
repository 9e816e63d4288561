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
"$D9M" report --db "$T/s.sqlite" --format html -o "$T/r.html" || { echo "FAIL: report"; exit 1; }
# Self-contained: no URL, no src=, no href=, no @import.
if grep -nE 'https?://|src=|href=|@import|url\(' "$T/r.html"; then echo "FAIL: the HTML refers to something outside itself"; exit 1; fi
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1400 \
  --screenshot="$T/shot.png" "file://$T/r.html" > "$T/chromium.log" 2>&1
[[ -s $T/shot.png ]] || { echo "FAIL: no screenshot"; cat "$T/chromium.log"; exit 1; }
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$T/r.html" > "$T/dom.html" 2> /dev/null
python3 - "$T/shot.png" "$T/dom.html" <<'PY'
import struct, sys, zlib
png = open(sys.argv[1], 'rb').read()
assert png[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, w = 8, b'', 0
while pos < len(png):
    n, kind = struct.unpack('>I4s', png[pos:pos + 8]); data = png[pos + 8:pos + 8 + n]; pos += 12 + n
    if kind == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', data[:10])
    if kind == b'IDAT': idat += data
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 4 if ctype == 6 else 3
raw, stride, prev, rows, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), [], 0
for y in range(h):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0; b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
def count(rgb):
    return sum(1 for r in rows for x in range(0, stride, bpp) if tuple(r[x:x + 3]) == rgb)
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
