"""A real model's training steps for `d9m exec` with the PyTorch hook, on the GPU (ci/gpu-audit.sh).

A small network a user trains: an embedding (its backward accumulates into shared rows), a
convolution (cuDNN's backward), a bilinear upsampling, max-pooling and a linear head, with
cross-entropy and SGD, for STEPS steps (default 3) on fixed data. D9M_TORCH_MODE=deterministic runs
it under torch.use_deterministic_algorithms(True) (ops without a deterministic path warn rather than
raise, so the trace shows which ones still diverge); anything else, PyTorch's defaults. Every
dispatched op is traced (d9m_torch.Trace, $D9M_TRACE); the final weights go to weights.bin and the
data to inputs.bin, so `d9m exec` names the output that differs and `d9m trace diff` the first op.
Runs on the CPU where there is no CUDA device (nothing there races: a plumbing check only).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import d9m_torch  # noqa: E402

deterministic = os.environ.get("D9M_TORCH_MODE") == "deterministic"
torch.use_deterministic_algorithms(deterministic, warn_only=True)
torch.backends.cudnn.deterministic = deterministic
torch.backends.cudnn.benchmark = False
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
steps = int(os.environ.get("STEPS", "3"))

g = torch.Generator().manual_seed(7)
tokens = torch.randint(0, 512, (64, 16), generator=g)
labels = torch.randint(0, 10, (64,), generator=g)
params = {
    "embed": torch.randn(512, 32, generator=g) * 0.1,
    "conv": torch.randn(32, 32, 3, 3, generator=g) * 0.05,
    "head": torch.randn(10, 32 * 8 * 8, generator=g) * 0.01,
}
params = {k: v.to(device).requires_grad_() for k, v in params.items()}
tokens, labels = tokens.to(device), labels.to(device)


def step():
    x = F.embedding(tokens, params["embed"])              # [64, 16, 32]
    x = x.transpose(1, 2).reshape(64, 32, 4, 4)             # a 4x4 "image" of 32 channels
    x = F.interpolate(x, scale_factor=4, mode="bilinear", align_corners=False)  # 16x16
    x = F.relu(F.conv2d(x, params["conv"], padding=1))
    x = F.max_pool2d(x, 2)                                  # 8x8
    logits = x.reshape(64, -1) @ params["head"].t()
    loss = F.cross_entropy(logits, labels)
    grads = torch.autograd.grad(loss, list(params.values()))
    with torch.no_grad():
        for p, gr in zip(params.values(), grads):
            p.sub_(0.1 * gr)


with d9m_torch.Trace() as trace:
    for _ in range(steps):
        step()
        trace.next_step()
if device.type == "cuda":
    torch.cuda.synchronize()

with open("weights.bin", "wb") as f:
    for p in params.values():
        f.write(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
with open("inputs.bin", "wb") as f:
    f.write(tokens.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
