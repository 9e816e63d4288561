"""Programs for the PyTorch hook's attribution checks (suites/python/torch_hook_test.sh), each one
what an audit of the hook found misattributed. python3 hook_cases.py CASE, under `d9m exec`:

  optim       a deterministic training loop through torch.optim (SGD with momentum, Adam) and
              torch.empty: nothing races, so no source (the profiler's handles and uninitialised
              memory had been digested as outputs, and named as the source)
  inplace     an in-place op (schema Tensor(a!)) that flips the last bit of one element in trial 1,
              a stand-in for a racing index_add_: it must be the source (its input was digested
              after it ran, and the divergence blamed on untraced code)
  untraced    a Python float from untraced code differs in trial 1: the source is outside the
              traced ops, not the op that used it (non-tensor arguments were not digested)
  alias       a tensor differs before the trace (untraced code), then torch.add(x, y, out=x): the
              source is outside the traced ops (x was matched as the out= argument and its old
              contents never digested, so the op was blamed)
  blocks      Trace blocks: two over one file, and one object entered three times with next_step()
              between; a sparse tensor, a conjugate view and _foreach_add_ (which returns nothing)
              traced: the trace is accepted, with steps 0 to 2 (a second block started again at
              step 0; next_step() between blocks was lost; a sparse tensor and a conjugate view
              crashed the digest; _foreach_add_ was not traced)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402

import d9m_torch  # noqa: E402

case, trial = sys.argv[1], int(os.environ["D9M_TRIAL"])
torch.manual_seed(0)

if case == "optim":
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    x, y = torch.randn(32, 8), torch.randn(32, 2)
    sgd = torch.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9)
    adam = torch.optim.Adam(model[2].parameters(), lr=0.01)
    with d9m_torch.Trace() as trace:
        for step in range(3):
            buffer = torch.empty(32, 2)  # uninitialised, then filled
            buffer.copy_(model(x))
            loss = torch.nn.functional.mse_loss(buffer, y)
            sgd.zero_grad()
            adam.zero_grad()
            loss.backward()
            sgd.step()
            adam.step()
            trace.next_step()
    np.save("weights.npy", model[0].weight.detach().numpy())
elif case == "inplace":
    lib = torch.library.Library("d9mhook", "DEF")
    lib.define("bump_(Tensor(a!) x, Tensor y) -> Tensor(a!)")

    def bump_(x, y):
        x.add_(y)
        if trial == 1:  # the last bit of element 0, as a racing accumulation would leave it
            x.view(-1)[0:1].view(torch.int32).bitwise_xor_(1)
        return x

    lib.impl("bump_", bump_, "CPU")
    with d9m_torch.Trace():
        a = torch.ones(16) * 2
        torch.ops.d9mhook.bump_(a, torch.arange(16, dtype=torch.float32))
        a.sum()
elif case == "untraced":
    scale = 1.0 if trial == 0 else 1.0 + 2.0 ** -20  # computed by plain Python, outside any op
    with d9m_torch.Trace():
        a = torch.ones(16) * 2
        (a * scale).sum()
elif case == "alias":
    x = torch.ones(16) * (3.0 if trial == 1 else 2.0)  # before the trace
    with d9m_torch.Trace():
        torch.add(x, torch.ones(16), out=x)
        x.sum()
elif case == "blocks":
    with d9m_torch.Trace() as trace:
        a = torch.arange(8, dtype=torch.float32) * 2
        trace.next_step()
    with d9m_torch.Trace():
        s = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 3.0]), (4,))
        (s * 2).to_dense() + a[:4]
        torch.view_as_real(torch.ones(2, dtype=torch.complex64).conj() * 2)
    trace = d9m_torch.Trace()
    for step in range(2):
        with trace:
            torch._foreach_add_([a, a[:4]], 1.0)
        trace.next_step()
else:
    raise SystemExit(f"hook_cases.py: no case {case}")
