"""The PyTorch hook's digest of CUDA tensors through libd9m_device_digest.so equals its host digest
(the same tensors copied to the host), over dtypes, lengths around a leaf and non-contiguous
views, and the device path is the one taken. Exit 77 where PyTorch has no CUDA device.

    python3 device_digest_check.py BINDINGS_DIR LIBRARY
"""
import os
import sys

sys.path.insert(0, sys.argv[1])
os.environ["D9M_DEVICE_DIGEST_LIBRARY"] = sys.argv[2]
import torch  # noqa: E402
import d9m_torch  # noqa: E402

if not torch.cuda.is_available():
    print("device_digest_check: PyTorch has no CUDA device: skipped")
    sys.exit(77)
torch.manual_seed(0)
checked = 0
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.uint8):
    for n in (1, 241, 1024, 1025, 4097, 3_000_001):
        t = (torch.randn(2 * n, device="cuda") * 100).to(dtype)
        for view in (t[:n], t[::2]):  # contiguous, and a strided view the hook makes contiguous first
            on_device, on_host = d9m_torch.digest(view), d9m_torch.digest(view.cpu())
            assert on_device == on_host, (dtype, n, view.is_contiguous(), on_device, on_host)
            checked += 1
assert d9m_torch._device_digest not in (None, False), "the device path was not taken"
print(f"device_digest_check: {checked} CUDA tensors digested on the GPU, equal to their host digests")
