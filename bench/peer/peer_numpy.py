#!/usr/bin/env python3
"""What a user does without d9m: run an op N times with NumPy, compare every output with the
first (numpy.array_equal) and hash it (hashlib), then count the distinct hashes. Runs
unsorted_segment_sum (numpy.add.at, the NumPy way to scatter-add) on the inputs d9m saved with
--save-outputs, so both sides compute the same thing on the same bytes.

    peer_numpy.py DIR N      DIR = <save-outputs>/unsorted_segment_sum/<config>
Prints one line: "peer trials=N seconds=S distinct=K".
"""
import hashlib
import sys
import time

start = time.perf_counter()
import numpy as np  # noqa: E402  (the imports are part of what the user's script costs, as in peer_torch.py)

import peer_inputs  # noqa: E402

folder, n = sys.argv[1], int(sys.argv[2])
data, ids, segments = peer_inputs.load(folder)
first, digests = None, set()
for _ in range(n):
    out = np.zeros((segments, data.shape[1]), dtype=np.float32)
    np.add.at(out, ids, data)
    if first is None:
        first = out.copy()
    elif not np.array_equal(out, first):
        pass                          # a user would log it; the hash below counts it
    digests.add(hashlib.sha256(out.tobytes()).hexdigest())
print(f"peer trials={n} seconds={time.perf_counter() - start:.6f} distinct={len(digests)}")
