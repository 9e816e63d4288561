#!/usr/bin/env bash
# d9m against what a user would do without it, same op, shape, inputs and N, in one go: prints
# the trials per second of both, end to end (process start, inputs, every trial digested and
# compared, and for d9m every trial stored), and the ratio.
#   bench/peer/compare.sh [path/to/d9m] [N] [cpu|gpu]
#     cpu (default): d9m's cpu.serial against NumPy (peer_numpy.py)
#     gpu: d9m's cuda.atomic against PyTorch's index_add_ on CUDA (peer_torch.py), both atomic
#     cpu-torch: d9m's cpu.serial against PyTorch's index_add_ on the CPU (peer_torch.py)
# PyTorch is taken from the first of python3, /usr/bin/python3 that has it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
d9m=${1:-$here/../../build/harness/d9m}
n=${2:-200}
side=${3:-cpu}
python=python3
peer_args=()
case $side in
  cpu) backend=cpu variant=cpu.serial peer_script=peer_numpy.py peer_what="NumPy add.at + array_equal + hashlib" ;;
  gpu) backend=cuda variant=cuda.atomic peer_script=peer_torch.py peer_what="PyTorch index_add_ on CUDA + torch.equal + hashlib" ;;
  cpu-torch) backend=cpu variant=cpu.serial peer_script=peer_torch.py peer_args=(cpu) peer_what="PyTorch index_add_ on the CPU + torch.equal + hashlib" ;;
  *) echo "compare.sh: the third argument is cpu, gpu or cpu-torch, not '$side'" >&2; exit 2 ;;
esac
if [[ $peer_script == peer_torch.py ]]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch" 2> /dev/null; then python=$p; break; fi
  done
fi
"$python" -c "import numpy" 2> /dev/null || "$python" -m pip install -q numpy
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
config=8_segments
# Inputs for the peer, written by d9m itself (so both use the same bytes).
"$d9m" run --backend cpu --op unsorted_segment_sum --config $config --variant cpu.serial -n 2 \
  --db "$t/inputs.sqlite" --save-outputs "$t/saved" -q 2> /dev/null
start=$(date +%s.%N)
"$d9m" run --backend $backend --op unsorted_segment_sum --config $config --variant $variant -n "$n" --no-canaries \
  --db "$t/d9m.sqlite" -q 2> /dev/null  # the controls are not what the peer does: left out
end=$(date +%s.%N)
peer=$("$python" "$here/$peer_script" "$t/saved/unsorted_segment_sum/$config" "$n" ${peer_args[@]+"${peer_args[@]}"})
python3 - "$start" "$end" "$n" "$peer" "$variant" "$peer_what" <<'PY'
import sys
start, end, n, peer, variant, peer_what = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
fields = dict(f.split("=") for f in peer.split()[1:])
d9m_rate, peer_rate = n / (end - start), n / float(fields["seconds"])
print(f"unsorted_segment_sum/8_segments, {variant}, N={n}")
print(f"d9m   {d9m_rate:10.1f} trials/s  ({end - start:.3f} s end to end)")
print(f"peer  {peer_rate:10.1f} trials/s  ({float(fields['seconds']):.3f} s end to end, {peer_what}, {fields['distinct']} distinct)")
print(f"ratio {d9m_rate / peer_rate:10.2f}x")
PY
