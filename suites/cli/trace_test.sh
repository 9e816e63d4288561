#!/usr/bin/env bash
# Pipelines and `d9m trace diff` end to end (issue 14): a pipeline whose one op flips a bit in a
# known call (trial 1, step 1) must be named as the source at that step; its all-ordered setting
# shows no divergence; the HTML chart renders in Chromium, in the trace diff and in `d9m report`; bad operands, bad pipelines and an
# edited trace get clear errors, and nothing stored is lost.
# Usage: trace_test.sh path/to/d9m_with_faults
set -u
D9M=$(realpath "$1")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../check.sh"

# x and b are state: each step takes the bias gradient of x, moves b by it and x by b.
pipeline() {  # pipeline GRAD_VARIANT -> a catalogue with one pipeline, settings "ordered" and "flip"
  cat <<JSON
{"schema": "d9m.catalog/1", "pipelines": [{"name": "bias_fit", "steps": 3, "seed": 5, "ops": [
  {"name": "grad", "op": "bias_add_grad", "params": {"n": 8, "h": 8, "w": 8, "c": 3}, "inputs": ["x"], "output": "g", "variant": "$1"},
  {"name": "move_b", "op": "bias_add", "params": {"n": 1, "h": 1, "w": 1, "c": 3}, "inputs": ["b", "g"], "output": "b", "variant": "cpu.serial"},
  {"name": "move_x", "op": "bias_add", "params": {"n": 8, "h": 8, "w": 8, "c": 3}, "inputs": ["x", "b"], "output": "x", "variant": "cpu.serial"}],
  "settings": {"ordered": {}, "flip": {"grad": "test.flip_at_call"}}}]}
JSON
}
pipeline cpu.ordered > "$T/p.json"

# The flip variant's calls: trial 0 steps 0-2 are calls 1-3, trial 1 steps 0-2 calls 4-6, so call
# 5 is trial 1, step 1. It claims determinism and trial 1's trajectory differs, so the run's
# verdict is a broken claim (exit 1).
D9M_TEST_FLIP_CALL=5 "$D9M" run --catalog "$T/p.json" -n 3 --threads 2 --db "$T/s.sqlite" --no-canaries > "$T/out" 2> "$T/err"
check "run: the flipping setting breaks its claim" 1 $? "$T/err" 'FAIL: claim broken.*pipeline:bias_fit'
grep -qE 'pipeline:bias_fit.*ordered' "$T/out" || { echo "FAIL: the status table has no pipeline row"; cat "$T/out"; failures=$((failures + 1)); }
"$D9M" verify --db "$T/s.sqlite" > "$T/verify" 2>&1; check "verify after the run" 0 $? "$T/verify" 'OK'

"$D9M" trace diff --db "$T/s.sqlite" --setting flip > "$T/md" 2> "$T/err"
check "trace diff names the source" 1 $? "$T/md" '\*\*Source:\*\* step 1, op 0 `grad` \(bias_add_grad, test.flip_at_call\)'
grep -qE '^# b: .* trial 1 ' "$T/md" || { echo "FAIL: B is not trial 1, the first trial that differs"; cat "$T/md"; failures=$((failures + 1)); }
grep -qE '^\| 0 \| 0/3 \| 0/2 \| 0 \| 0 \|' "$T/md" || { echo "FAIL: step 0 shows a divergence"; cat "$T/md"; failures=$((failures + 1)); }
grep -qE '^\| 1 \| 3/3 \| 2/2 \| [1-9]' "$T/md" || { echo "FAIL: step 1 does not show all three outputs differing"; cat "$T/md"; failures=$((failures + 1)); }
grep -qE 'in 1 elements \(max \|a-b\|' "$T/md" || { echo "FAIL: the source's diff stats (one element) are missing"; cat "$T/md"; failures=$((failures + 1)); }
# The last-bit change healed: step 2's much larger bias gradient absorbed it, so step 2 and the
# final parameters are equal again. The trial still differs (its trajectory did), and its diff
# stats, which compare the final parameters, count 0 elements.
grep -qE '^\| 2 \| 0/3 \| 0/2 \| 0 \| 0 \|' "$T/md" || { echo "FAIL: step 2 did not heal"; cat "$T/md"; failures=$((failures + 1)); }
healed=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT t.diff_count FROM trials t JOIN cases c ON c.id = t.case_id WHERE c.variant = 'flip' AND t.trial = 1\").fetchone()[0])" "$T/s.sqlite")
[[ $healed == 0 ]] || { echo "FAIL: trial 1's final parameters differ in $healed elements, expected 0 (healed)"; failures=$((failures + 1)); }
"$D9M" trace diff --db "$T/s.sqlite" --setting ordered > "$T/md" 2> "$T/err"; check "ordered setting: no divergence" 0 $? "$T/md" 'No divergence'
"$D9M" trace diff "$T/s.sqlite#0" "$T/s.sqlite#2" --setting flip > "$T/md" 2> "$T/err"
check "trial 0 against trial 2: the flip of trial 1 is not in either" 0 $? "$T/md" 'No divergence'
"$D9M" trace diff "$T/s.sqlite#1" "$T/s.sqlite#2" --setting flip --format json > "$T/j" 2> "$T/err"; check "trial 1 against trial 2" 1 $?
python3 - "$T/j" <<'PY' || failures=$((failures + 1))
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "d9m.trace-diff/1", d["schema"]
x = d["diffs"][0]
assert x["source"]["step"] == 1 and x["source"]["name"] == "grad", x["source"]
assert x["stats_known"] is False and x["steps"][1]["parameter_elements"] is None, x["steps"][1]
assert x["source"]["claim"]["determinism"] == "deterministic", x["source"]["claim"]
PY

# An HTML page is self-contained: it names nothing outside itself.
self_contained() {  # self_contained NAME FILE
  if grep -nE 'https?://|src=|href=|@import|url\(' "$2"; then echo "FAIL: $1 refers to something outside itself"; failures=$((failures + 1)); fi
}
# The divergence chart as a person sees it in Chromium: both series' colours on screen, both
# polylines and the source paragraph (MARKER) in the page's DOM.
browser=$(command -v chromium || command -v chromium-browser || true)
chart_on_screen() {  # chart_on_screen NAME FILE MARKER
  [[ -n $browser ]] || { echo "chromium not installed: $1's chart was not looked at"; return; }
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,2400 \
    --screenshot="$T/shot.png" "file://$2" > "$T/chromium.log" 2>&1
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$2" > "$T/dom.html" 2> /dev/null
  read -r red blue < <(python3 "$(dirname "${BASH_SOURCE[0]}")/../report/png_colours.py" "$T/shot.png" c0392b 2e86c1 | tr '\n' ' ')
  echo "$1 screenshot: ${red:-0} pixels of the elements series, ${blue:-0} of the ULP series"
  if (( ${red:-0} > 80 && ${blue:-0} > 80 )) && [[ $(grep -o '<polyline' "$T/dom.html" | wc -l) == 2 ]] && grep -q "$3" "$T/dom.html"; then
    pass=$((pass + 1))
  else
    echo "FAIL: $1: the chart or the source is not on screen"; failures=$((failures + 1)); cat "$T/chromium.log"
  fi
}

"$D9M" trace diff --db "$T/s.sqlite" --setting flip --format html -o "$T/t.html"; check "html" 1 $?
self_contained "the trace diff's HTML" "$T/t.html"
chart_on_screen "trace diff" "$T/t.html" 'id="source"'

# The main report shows the same: the flipping setting's source and its chart (trial 0 against
# trial 1), the ordered setting in one line.
"$D9M" report --db "$T/s.sqlite" > "$T/rmd" 2> "$T/err"
check "report md: the pipeline's source in a line" 1 $? "$T/rmd" '^- bias_fit \(setting flip, 3_steps, run [0-9a-f]{12} on S1\): 2 trajectories in 3 trials; trial 0 against trial 1: source step 1, op 0 `grad` \(bias_add_grad, test.flip_at_call\), claim deterministic$'
grep -qE '^- bias_fit \(setting ordered, .*\): one trajectory in 3 trials, no divergence$' "$T/rmd" || { echo "FAIL: the report does not say the ordered setting agreed"; cat "$T/rmd"; failures=$((failures + 1)); }
"$D9M" report --db "$T/s.sqlite" --format html -o "$T/r.html"; check "report html" 1 $?
grep -qF '<svg width="640" height="240" role="img" aria-label="divergence by step">' "$T/r.html" &&
  grep -qF '<b>Source:</b> step 1, op 0 <code>grad</code> (bias_add_grad, test.flip_at_call)' "$T/r.html" &&
  grep -qE '<li>bias_fit \(setting ordered, .*\): one trajectory in 3 trials, no divergence</li>' "$T/r.html" ||
  { echo "FAIL: the HTML report has no divergence chart, no source or no line for the ordered setting"; grep -A3 Pipelines "$T/r.html"; failures=$((failures + 1)); }
self_contained "the HTML report" "$T/r.html"
# And the JSON report: each pipeline case, with the trace diff's own object where it diverged.
"$D9M" report --db "$T/s.sqlite" --format json -o "$T/r.json"; check "report json" 1 $?
python3 - "$T/r.json" <<'PY' || { echo "FAIL: the JSON report's pipelines"; failures=$((failures + 1)); }
import json, sys
p = {x["setting"]: x for x in json.load(open(sys.argv[1]))["pipelines"]}
flip, ordered = p["flip"], p["ordered"]
assert flip["pipeline"] == "bias_fit" and flip["trials"] == 3 and flip["distinct"] == 2, flip
src = flip["diff"]["source"]
assert (src["step"], src["position"], src["name"], src["variant"]) == (1, 0, "grad", "test.flip_at_call"), src
assert src["claim"]["determinism"] == "deterministic" and flip["diff"]["steps"], flip["diff"]
assert ordered["distinct"] == 1 and ordered["diff"] is None and ordered["problem"] is None, ordered
PY
chart_on_screen "report" "$T/r.html" 'class="src"'
"$D9M" report --db "$T/s.sqlite" --format html --audit -o "$T/audit.html" 2> "$T/err"; check "audit html" 1 $? "$T/audit.html" 'aria-label="divergence by step"'

# Bad operands and bad pipelines: exit 2 with the place named, nothing written.
cp "$T/s.sqlite" "$T/before.sqlite"
"$D9M" trace diff "$T/s.sqlite#9" --setting flip 2> "$T/err"; check "no such trial" 2 $? "$T/err" 'has no trial 9'
"$D9M" trace diff "$T/s.sqlite#x" 2> "$T/err"; check "bad trial" 2 $? "$T/err" 'expected STORE\[@run:ID\]\[#TRIAL\]'
"$D9M" trace diff "$T/s.sqlite@run:ffff" 2> "$T/err"; check "no such run" 2 $? "$T/err" "no run in .* has an id starting with 'ffff'"
"$D9M" trace diff "$T/s.sqlite" --pipeline nope 2> "$T/err"; check "no such pipeline" 2 $? "$T/err" 'no pipeline trace matching --pipeline nope'
"$D9M" trace diff "$T/missing.sqlite" 2> "$T/err"; check "missing store" 3 $? "$T/err" 'missing.sqlite'
"$D9M" trace diff '#1' 2> "$T/err"; check "no store before #" 2 $? "$T/err" 'with a store before'
"$D9M" trace diff "$T" 2> "$T/err"; check "a folder" 2 $? "$T/err" 'a folder, not a store'
sed 's/"steps": 3/"steps": 4/' "$T/p.json" > "$T/p4.json"
"$D9M" run --catalog "$T/p4.json" -n 2 --db "$T/other.sqlite" --no-canaries --pipeline bias_fit -q 2> /dev/null
"$D9M" trace diff "$T/s.sqlite" "$T/other.sqlite" 2> "$T/err"; check "a trace of another pipeline" 2 $? "$T/err" 'is another pipeline'
# --steps: the catalogue's pipeline at 4 steps is the pipeline written with 4 (one definition, one
# id, traces that compare), and another case than the 3-step one; without a pipeline it is refused.
"$D9M" run --catalog "$T/p.json" --steps 4 -n 2 --db "$T/steps.sqlite" --no-canaries --pipeline bias_fit -q 2> /dev/null
config_ids() { python3 -c "import sqlite3,sys; print(sorted(set(r[0] for r in sqlite3.connect(sys.argv[1]).execute('SELECT config || \" \" || config_id FROM cases WHERE op = \"pipeline:bias_fit\"'))))" "$1"; }
[[ $(config_ids "$T/steps.sqlite") == "$(config_ids "$T/other.sqlite")" && $(config_ids "$T/steps.sqlite") == *4_steps* ]] ||
  { echo "FAIL: --steps 4 is not the pipeline written with 4 steps: $(config_ids "$T/steps.sqlite") vs $(config_ids "$T/other.sqlite")"; failures=$((failures + 1)); }
"$D9M" trace diff "$T/steps.sqlite" "$T/other.sqlite" --setting ordered > /dev/null 2> "$T/err"; check "--steps: traces compare with the pipeline written so" 0 $?
"$D9M" run --profile quick --steps 4 --op bias_add --db "$T/new.sqlite" 2> "$T/err"; check "--steps without a pipeline" 2 $? "$T/err" '--steps sets the steps of the pipelines, and this run has none'
"$D9M" run --catalog "$T/p.json" --steps 0 --pipeline bias_fit --db "$T/new.sqlite" 2> "$T/err"; check "--steps 0" 2 $? "$T/err" 'steps'
sed 's/"output": "b", "variant"/"output": "g", "variant"/' "$T/p.json" > "$T/twice.json"
"$D9M" run --catalog "$T/twice.json" -n 2 --db "$T/new.sqlite" 2> "$T/err"
check "a tensor written twice" 2 $? "$T/err" 'twice.json: pipelines\[0\]\.ops\[1\]\.output: "g" is already written by grad'
[[ ! -e $T/new.sqlite ]] || { echo "FAIL: a store was created for a bad pipeline"; failures=$((failures + 1)); }
sed 's/"c": 3}, "inputs": \["b"/"c": 4}, "inputs": ["b"/' "$T/p.json" > "$T/shape.json"
"$D9M" run --catalog "$T/shape.json" -n 2 --db "$T/new.sqlite" 2> "$T/err"
check "an edge whose sizes differ" 2 $? "$T/err" 'ops\[1\]\.inputs\[1\]: "g" is f32 \[3\] \(3 elements\), but bias_add.s input bias is f32 \[4\]'
"$D9M" run --catalog "$T/p.json" --pipeline 'nope*' --db "$T/new.sqlite" 2> "$T/err"; check "--pipeline matching nothing" 2 $? "$T/err" "--pipeline 'nope\*' matches no pipeline"
cmp -s "$T/s.sqlite" "$T/before.sqlite" || { echo "FAIL: a failed command changed the store"; failures=$((failures + 1)); }

# The trace is evidence: merged with the rest, and an edited row is found by verify.
"$D9M" merge -o "$T/m.sqlite" "$T/s.sqlite" "$T/other.sqlite" > /dev/null 2>&1; check "merge" 0 $?
"$D9M" trace diff "$T/m.sqlite@run:$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT run_id FROM trace t JOIN cases c ON c.id = t.case_id WHERE c.config = \"3_steps\" LIMIT 1').fetchone()[0])" "$T/s.sqlite")" \
  --setting flip > "$T/md" 2> "$T/err"
check "trace diff on the merged store" 1 $? "$T/md" 'Source:\*\* step 1, op 0'
python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute(\"UPDATE trace SET inputs = '[]' WHERE trial = 2 AND step = 2 AND position = 1\")
c.commit()" "$T/m.sqlite"
"$D9M" verify --db "$T/m.sqlite" > "$T/verify" 2>&1; check "verify finds an edited trace row" 1 $? "$T/verify" 'trace of trial 2 step 2 op 1: the row does not match'

# Without a run id, trace diff takes the newest run with a trace that --pipeline and --setting
# match, and of two runs started in the same second the one stored last (found by review: the
# newest run was taken even when it had no such trace, and a random run id broke the tie).
sed 's/"name": "bias_fit"/"name": "bias_fit_again"/' "$T/p.json" > "$T/again.json"
"$D9M" run --catalog "$T/p.json" -n 2 --pipeline bias_fit --db "$T/two.sqlite" --no-canaries -q 2> /dev/null
"$D9M" run --catalog "$T/again.json" -n 2 --db "$T/two.sqlite" --no-canaries -q 2> /dev/null
# The same start second for both, and the first run's id made to sort last (every run_id column):
# an edit, which verify finds, so trace diff is told --no-verify.
python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute('PRAGMA foreign_keys = OFF')
first = c.execute('SELECT id FROM runs ORDER BY rowid LIMIT 1').fetchone()[0]
c.execute('UPDATE runs SET id = ?1 WHERE id = ?2', ('f' * 32, first))
for (table,) in c.execute(\"SELECT name FROM sqlite_master WHERE type = 'table'\").fetchall():
    if any(col[1] == 'run_id' for col in c.execute(f'PRAGMA table_info({table})')):
        c.execute(f'UPDATE {table} SET run_id = ?1 WHERE run_id = ?2', ('f' * 32, first))
c.execute(\"UPDATE runs SET started_at = '2026-01-01T00:00:00Z'\")
c.commit()" "$T/two.sqlite"
"$D9M" trace diff --no-verify --db "$T/two.sqlite" > "$T/md" 2> "$T/err"; check "the newest run of one second" 0 $? "$T/md" 'pipeline bias_fit_again'
"$D9M" trace diff --no-verify --db "$T/two.sqlite" --pipeline bias_fit > "$T/md" 2> "$T/err"; check "--pipeline: the newest run that has it" 0 $? "$T/md" 'pipeline bias_fit \('

# A program's trace (d9m exec) follows the program's own control flow (found by audit: traces
# that part were refused, exit 2, instead of naming the op that diverged first). prog.py writes
# the rows its mode and trial say; each digest is a name, padded to 32 hex digits.
cat > "$T/prog.py" << 'PY'
import json, os, sys
mode, trial = sys.argv[1], int(os.environ["D9M_TRIAL"])
h = lambda s: s.encode().hex().ljust(32, "0")[:32]
rows = [("load", ["x"], "a"), ("flaky", ["a"], "f1" if trial == 1 and mode in ("branch", "flaky") else "f0")]
if mode == "branch":    # the racing op's result sends trial 1 down another branch: one op more
    rows += [("extra", ["f1"], "e")] if trial == 1 else []
elif mode == "path":    # every op agrees, then trial 1 runs another op: untraced code chose
    rows += [("other" if trial == 1 else "same", ["f0"], "o")]
elif mode == "shorter": # every op agrees, and trial 1 stops early
    rows = rows[:1] if trial == 1 else rows
elif mode == "healed":  # an untraced input differs, and every traced output agrees
    rows[1] = ("flaky", ["a", "t1" if trial == 1 else "t0"], "f0")
rows += [] if mode == "shorter" and trial == 1 else [("last", [rows[-1][2]], "z")]
with open(os.environ["D9M_TRACE"], "w") as f:
    for i, (name, ins, out) in enumerate(rows):
        f.write(json.dumps({"step": 0, "position": i, "name": name, "op": "test." + name, "variant": "torch.cpu",
                            "inputs": [h(x) for x in ins], "digest": h(out)}) + "\n")
PY
prog() { "$D9M" exec -n 2 --db "$T/$1.sqlite" -- python3 "$T/prog.py" "$1" > /dev/null 2>&1; }
prog branch; "$D9M" trace diff --db "$T/branch.sqlite" > "$T/md" 2> "$T/err"
check "a trial that ran one op more: the racing op before it is the source" 1 $? "$T/md" '\*\*Source:\*\* step 0, op 1 `flaky`'
grep -qE 'part after 2 op\(s\): a runs `last` \(step 0, op 2\), b runs `extra` \(step 0, op 2\)' "$T/md" ||
  { echo "FAIL: where the traces part is not said"; cat "$T/md"; failures=$((failures + 1)); }
grep -qE '^Propagated: 2 differing' "$T/md" || { echo "FAIL: the ops after the part are not propagated"; cat "$T/md"; failures=$((failures + 1)); }
prog path; "$D9M" trace diff --db "$T/path.sqlite" > "$T/md" 2> "$T/err"
check "traces that part with every op before agreeing: outside the traced ops" 1 $? "$T/md" '\*\*Source: outside the traced ops\*\*, before step 0, op 2 `same`.*chose another path'
grep -q 'Claim of :' "$T/md" && { echo "FAIL: an outside source names an empty claim"; failures=$((failures + 1)); }
"$D9M" trace diff --db "$T/path.sqlite" --format html > "$T/html" 2> "$T/err"
check "the html says the same" 1 $? "$T/html" '<b>Source: outside the traced ops</b>, before step 0, op 2 <code>same</code>.*chose another path'
grep -q '<h2>program exec:prog.py' "$T/html" || { echo "FAIL: the html calls a program a pipeline"; failures=$((failures + 1)); }
grep -q 'inputs bit-equal' "$T/html" && { echo "FAIL: the html says an outside source's inputs are bit-equal"; failures=$((failures + 1)); }
prog shorter; "$D9M" trace diff --db "$T/shorter.sqlite" > "$T/md" 2> "$T/err"
check "a trial that stopped early" 1 $? "$T/md" 'Source: outside the traced ops.*one trace ends here and the other goes on'
grep -q 'b runs nothing (its trace ends)' "$T/md" || { echo "FAIL: the note does not say which trace ended"; failures=$((failures + 1)); }
prog healed; "$D9M" trace diff "$T/healed.sqlite#0" "$T/healed.sqlite#1" > "$T/md" 2> "$T/err"
check "an input that differs where every output agrees is no divergence" 0 $? "$T/md" 'No divergence'
# Two stores holding the same run (a copy, a merge) are compared trial 0 with trial 0.
cp "$T/branch.sqlite" "$T/copy.sqlite"
"$D9M" trace diff "$T/branch.sqlite" "$T/copy.sqlite" > "$T/md" 2> "$T/err"
check "a store against its copy: trial 0 of each" 0 $? "$T/md" 'No divergence'
grep -qE '^# b: .*copy\.sqlite run [0-9a-f]+ trial 0 ' "$T/md" || { echo "FAIL: b is not the copy's trial 0"; cat "$T/md"; failures=$((failures + 1)); }
# trace diff compares stores that verify (found by audit: an edited input digest moved the
# source, with no word of the edit); --no-verify compares one as it is.
python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute(\"UPDATE trace SET inputs = replace(inputs, '61', '62') WHERE trial = 1 AND position = 1\")
c.commit()" "$T/copy.sqlite"
"$D9M" trace diff --db "$T/copy.sqlite" > "$T/md" 2> "$T/err"
check "trace diff refuses an edited store" 1 $? "$T/err" 'copy.sqlite: does not verify, so it is not compared:.*--no-verify'
[[ -s $T/md ]] && { echo "FAIL: trace diff wrote a comparison of an edited store"; failures=$((failures + 1)); }
"$D9M" trace diff --db "$T/copy.sqlite" --no-verify > "$T/md" 2> "$T/err"
check "--no-verify compares it as it is" 1 $? "$T/md" 'Source: outside the traced ops'

checks_done
