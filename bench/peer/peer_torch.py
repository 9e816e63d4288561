#!/usr/bin/env python3
"""What a user does without d9m: run an op N times with PyTorch, on CUDA or the CPU, compare
every output with the first (torch.equal, on the device) and hash it (hashlib, after copying it to
the host), then count the distinct hashes. Runs unsorted_segment_sum as Tensor.index_add_
(PyTorch's scatter-add, atomic on CUDA) on the inputs d9m saved with --save-outputs, like
peer_numpy.py.

    peer_torch.py DIR N [cuda|cpu]      DIR = <save-outputs>/unsorted_segment_sum/<config>
Prints one line: "peer trials=N seconds=S distinct=K".
"""
import hashlib
import sys
import time

start = time.perf_counter()
import numpy as np  # noqa: E402  (the imports are part of what the user's script costs)
import torch  # noqa: E402

import peer_inputs  # noqa: E402

folder, n = sys.argv[1], int(sys.argv[2])
device_name = sys.argv[3] if len(sys.argv) > 3 else "cuda"
data, ids, segments = peer_inputs.load(folder)
device = torch.device(device_name)
data_t = torch.from_numpy(data).to(device)
ids_t = torch.from_numpy(ids.astype(np.int64)).to(device)
first, digests = None, set()
for _ in range(n):
    out = torch.zeros((segments, data.shape[1]), dtype=torch.float32, device=device)
    out.index_add_(0, ids_t, data_t)
    if first is None:
        first = out.clone()
    elif not torch.equal(out, first):
        pass                          # a user would log it; the hash below counts it
    digests.add(hashlib.sha256(out.cpu().numpy().tobytes()).hexdigest())
if device.type == "cuda":
    torch.cuda.synchronize()
print(f"peer trials={n} seconds={time.perf_counter() - start:.6f} distinct={len(digests)}")
