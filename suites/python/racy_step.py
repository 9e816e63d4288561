"""A training-like step for `d9m exec` with the PyTorch hook (suites/python/torch_hook_test.sh).

A linear layer's weights are moved by a gradient whose sum goes through a custom op,
d9mtest::racy_sum. With RACY=1 that op adds its chunks' partial sums in the order its threads
finish (each waits a random moment first): a float sum in the scheduler's order, as an atomicAdd
reduction does. With RACY=0 it adds them in chunk order. Two outputs: weights.npy (downstream of the
sum) and inputs.npy (not), so exactly one output can differ.
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402

import d9m_torch  # noqa: E402

torch.set_num_threads(1)
RACY = os.environ.get("RACY", "1") == "1"
lib = torch.library.Library("d9mtest", "DEF")
lib.define("racy_sum(Tensor x) -> Tensor")


def racy_sum(x):
    chunks = x.reshape(8, -1)
    parts, lock = [], threading.Lock()

    def work(i):
        if RACY:
            time.sleep(int.from_bytes(os.urandom(1), "little") / 255 * 0.002)
        p = chunks[i].sum()
        with lock:
            parts.append((i, p))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not RACY:
        parts.sort(key=lambda ip: ip[0])
    acc = torch.zeros((), dtype=x.dtype)
    for _, p in parts:
        acc = acc + p
    return acc.reshape(1)


lib.impl("racy_sum", racy_sum, "CPU")

torch.manual_seed(0)
x = torch.randn(64, 32)
w = torch.randn(32, 4)
# Magnitudes over many binades, so the order of the partial sums shows in the last bits.
scale = torch.pow(10.0, torch.arange(8, dtype=torch.float32) - 4).repeat_interleave(32)
with d9m_torch.Trace() as trace:
    for step in range(3):
        y = torch.relu(x @ w)
        g = torch.ops.d9mtest.racy_sum(y.reshape(-1) * scale)
        w = w - 1e-3 * g * torch.tanh(w)
        trace.next_step()
np.save("weights.npy", w.numpy())
np.save("inputs.npy", x.numpy())
