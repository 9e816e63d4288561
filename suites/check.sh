# Sourced by the shell tests: `check` counts a command's exit code (and, given a file and an
# extended regex, its output) as a pass or a failure; the test ends with `checks_done`.
failures=0
pass=0
check() {  # check NAME EXPECTED_RC ACTUAL_RC [FILE PATTERN]
  local name=$1 want=$2 got=$3
  if [[ $got != "$want" ]]; then
    echo "FAIL: $name: exit $got, expected $want"; failures=$((failures + 1)); [[ -n ${4:-} ]] && cat "$4"; return
  fi
  if [[ -n ${4:-} ]] && ! grep -qE -- "$5" "$4"; then
    echo "FAIL: $name: output does not match /$5/:"; cat "$4"; failures=$((failures + 1)); return
  fi
  pass=$((pass + 1))
}
# Prints the closing line CTest's log readers know and exits 0 only without a failure.
checks_done() {
  echo "$pass passed, $failures failed"
  [[ $failures == 0 ]]
}
