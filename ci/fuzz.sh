#!/usr/bin/env bash
# Replays every input that once crashed the libFuzzer targets (catalogue, store, attestation,
# merge; suites/fuzz/regressions: a regression fails), then fuzzes each target for a short budget
# (seconds per target in $1 or D9M_FUZZ_SECONDS, default 30). New findings are saved to
# build/fuzz/crashes/ and reported; they fail the script only with D9M_FUZZ_STRICT=1, so that a
# random discovery does not block unrelated work (add the input to suites/fuzz/regressions/ with
# its fix). The targets come from D9M_FUZZ_BUILD_DIR, a clang build configured with -DD9M_FUZZ=ON
# (which adds libFuzzer's coverage to the harness) and -fsanitize=address,undefined (ci/test.sh's
# own build is one); without it they are built here in build/fuzz. Longer by hand: build/fuzz/suites/fuzz/fuzz_store -max_total_time=3600 build/fuzz/corpus/store
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-${D9M_FUZZ_SECONDS:-30}}
targets=(fuzz_catalog fuzz_store fuzz_baseline fuzz_attest fuzz_merge)
dir=${D9M_FUZZ_BUILD_DIR:-}
if [[ -z $dir ]]; then
  dir=build/fuzz
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DD9M_FUZZ=ON -DD9M_CUDA=OFF -DD9M_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
    > /dev/null
  mkdir -p build/fuzz
  cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}" d9m > build/fuzz.log 2>&1 ||
    { grep -E "error" -A3 build/fuzz.log | head -40; echo "fuzz: the clang build failed (build/fuzz.log)"; exit 1; }
fi
for t in "${targets[@]}"; do
  [[ -x $dir/suites/fuzz/$t ]] || { echo "fuzz: $dir/suites/fuzz/$t is not built (configure with -DD9M_FUZZ=ON)"; exit 1; }
done
# The seeds below are made with the same tree's d9m.
seed_d9m=$dir/harness/d9m
mkdir -p build/fuzz/crashes build/fuzz/corpus/catalog build/fuzz/corpus/store build/fuzz/corpus/baseline build/fuzz/corpus/attest build/fuzz/corpus/merge
cp suites/fuzz/corpus/catalog/* build/fuzz/corpus/catalog/
cp suites/fuzz/corpus/baseline/* build/fuzz/corpus/baseline/
cp suites/store/v1-store.sqlite build/fuzz/corpus/store/schema1.sqlite  # the migration path
# A real store as the seed of the store fuzzer (small: one op, two trials).
seed=build/fuzz/corpus/store/seed.sqlite
if [[ ! -s $seed ]]; then
  rm -f "$seed" "$seed-wal" "$seed-shm"
  "$seed_d9m" run --backend cpu --op bias_add_grad --config nhwc_8x16x16x32 -n 2 --db "$seed" -q --no-canaries 2> /dev/null
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$seed"
  rm -f "$seed"-wal "$seed"-shm
fi
cp "$seed" suites/store/v1-store.sqlite build/fuzz/corpus/merge/  # merge: a real store and the schema-1 fixture
# attest: a real envelope of the seed store, and its statement (the payload the target signs)
if [[ ! -s build/fuzz/corpus/attest/envelope.json ]]; then
  openssl genpkey -algorithm ed25519 -out build/fuzz/seed-key.pem 2> /dev/null
  "$seed_d9m" report --db "$seed" --format json -o build/fuzz/seed-report.json
  "$seed_d9m" attest --db "$seed" --report build/fuzz/seed-report.json --key build/fuzz/seed-key.pem \
    -o build/fuzz/corpus/attest/envelope.json
  python3 -c "import json,base64,sys; sys.stdout.buffer.write(base64.b64decode(json.load(open(sys.argv[1]))['payload']))" \
    build/fuzz/corpus/attest/envelope.json > build/fuzz/corpus/attest/statement.json
fi
found=0
# First every target replays the inputs that once crashed it (a regression fails the script).
for t in "${targets[@]}"; do
  kind=${t#fuzz_}
  shopt -s nullglob
  regressions=(suites/fuzz/regressions/$kind/*)
  shopt -u nullglob
  echo "== $t: replaying ${#regressions[@]} input(s) of suites/fuzz/regressions/$kind"
  if ((${#regressions[@]})); then
    $dir/suites/fuzz/$t "${regressions[@]}" > build/fuzz/replay.log 2>&1 ||
      { cat build/fuzz/replay.log; echo "REGRESSION: $t crashes again on a fixed input"; exit 1; }
  fi
done
# Then each fuzzes for the budget, as many at once as there are cores (each target is one
# process on one core; its findings go to build/fuzz/crashes/).
fuzz_one() {
  local t=$1 rc=0
  ASAN_OPTIONS=detect_leaks=1 $dir/suites/fuzz/$t -max_total_time="$seconds" -max_len=65536 \
    -artifact_prefix=build/fuzz/crashes/$t- build/fuzz/corpus/${t#fuzz_} > build/fuzz/$t.log 2>&1 || rc=$?
  echo $rc > build/fuzz/$t.rc
}
echo "== fuzzing ${targets[*]}: ${seconds}s each, $(nproc) at a time"
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= $(nproc))); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
for t in "${targets[@]}"; do
  echo "== $t: $(grep -E "^Done|ERROR|SUMMARY|what\(\)" build/fuzz/$t.log | tail -3 | tr '\n' ' ')"
  if [[ $(cat build/fuzz/$t.rc) != 0 ]]; then
    found=1
    echo "FINDING: $t crashed; the input is in build/fuzz/crashes/ (log: build/fuzz/$t.log)"
  fi
done
if ((found)); then
  [[ ${D9M_FUZZ_STRICT:-0} == 1 ]] && exit 1
  echo "fuzz: new findings reported above (not fatal without D9M_FUZZ_STRICT=1)"
else
  echo "fuzz: nothing found in ${seconds}s per target"
fi
