"""d9m's PyTorch hook: every op PyTorch dispatches, recorded as a d9m trace row.

Under ``Trace`` each aten op (and each custom op) that runs is written, as it returns, to a JSON
Lines file: its name, the device it ran on, the d9m-digest-v1 of each input tensor as it was
before the op ran, then one of the call's signature (every tensor argument's dtype and shape, and
every other argument's value), and the digest of its output (with every tensor it wrote in place). ``d9m exec`` sets ``D9M_TRACE`` to such a file for every trial and stores the rows, so
``d9m trace diff`` names the first op whose inputs were bit-equal and whose output differed.

    import d9m_torch
    with d9m_torch.Trace() as trace:        # writes to $D9M_TRACE (or the path given)
        for step in range(steps):
            train_step()
            trace.next_step()

The digest is d9m's (DESIGN.md "Digest: d9m-digest-v1"): the tensor's bytes, contiguous, in
4096-byte leaves; XXH3-64 of each leaf as 8 little-endian bytes; XXH3-128 of those, as 32 hex
digits, the same as d9m computes for a buffer on the CPU. An op with several tensor outputs gets
the digest of their digests (each followed by a newline). CUDA tensors are digested on their GPU
by d9m's own kernels where $D9M_DEVICE_DIGEST_LIBRARY names libd9m_device_digest.so (``d9m exec``
sets it when its build has one), else copied to the host to be digested: the two digests are equal.

Left out, because their bytes say nothing about the program (found by audit: each made a
deterministic training loop look nondeterministic): the profiler's own ops (``torch.optim`` calls
them; their output is a handle) and ops whose output is uninitialised memory (``empty``,
``empty_like``, ``new_empty``, ``resize_``, ...). The op that fills such a tensor is traced.
"""
import ctypes
import json
import os
import struct
import sys

import torch
try:
    import xxhash
except ImportError:  # the torch backend (d9m_torch.worker) needs no digest of its own; the hook does
    xxhash = None
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["digest", "digest_bytes", "Trace"]

_LEAF = 4096


def digest_bytes(data: bytes) -> str:
    """d9m-digest-v1 of a buffer, as 32 lowercase hex digits."""
    if xxhash is None:
        raise RuntimeError("d9m_torch: the trace hook needs the xxhash module (Debian: python3-xxhash)")
    leaves = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(data[i:i + _LEAF])) for i in range(0, len(data), _LEAF))
    return xxhash.xxh3_128_hexdigest(leaves)


_device_digest = None  # d9m_device_digest from the library, once loaded; False: not to be used


def _device_digest_function():
    """d9m_device_digest of $D9M_DEVICE_DIGEST_LIBRARY, or None (unset, or it did not load)."""
    global _device_digest
    if _device_digest is None:
        _device_digest = False
        path = os.environ.get("D9M_DEVICE_DIGEST_LIBRARY")
        if path:
            try:
                f = ctypes.CDLL(path).d9m_device_digest
            except (OSError, AttributeError) as e:
                print(f"d9m_torch: {path}: {e}; CUDA tensors are digested on the host", file=sys.stderr)
            else:
                f.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                              ctypes.c_char_p, ctypes.c_ulonglong]
                f.restype = ctypes.c_int
                _device_digest = f
    return _device_digest or None


def _digest_on_device(t: torch.Tensor):
    """The digest of a contiguous CUDA tensor computed on its GPU, or None where that cannot be."""
    global _device_digest
    f = _device_digest_function()
    if f is None:
        return None
    hex_out, error = ctypes.create_string_buffer(33), ctypes.create_string_buffer(512)
    # Queued on the tensor's current stream, behind the kernels that produced it.
    stream = torch.cuda.current_stream(t.device).cuda_stream
    if f(t.data_ptr(), t.numel() * t.element_size(), t.device.index, stream, hex_out, error, len(error)) == 0:
        return hex_out.value.decode()
    print(f"d9m_torch: {error.value.decode()}; CUDA tensors are digested on the host from here on", file=sys.stderr)
    _device_digest = False
    return None


def digest(t: torch.Tensor) -> str:
    """d9m-digest-v1 of a tensor's bytes (row-major, its own dtype).

    A sparse tensor is the digest of its parts' digests (indices, then values), each followed by a
    newline."""
    t = t.detach()
    if t.layout == torch.strided:
        t = t.resolve_conj().resolve_neg()  # a conjugate or negative view's values, not its lazy bits (found by review)
    else:
        if t.layout == torch.sparse_coo:
            parts = [t._indices(), t._values()]
        elif t.layout in (torch.sparse_csr, torch.sparse_bsr):
            parts = [t.crow_indices(), t.col_indices(), t.values()]
        elif t.layout in (torch.sparse_csc, torch.sparse_bsc):
            parts = [t.ccol_indices(), t.row_indices(), t.values()]
        else:
            parts = [t.to_dense()]
        return digest_bytes("".join(digest(p) + "\n" for p in parts).encode())
    if t.is_cuda and t.numel() > 0:
        on_device = _digest_on_device(t.contiguous())
        if on_device is not None:
            return on_device
    flat = t.contiguous().cpu().reshape(-1)
    if flat.numel() == 0:
        return digest_bytes(b"")
    return digest_bytes(flat.view(torch.uint8).numpy().tobytes())


def _tensors(tree):
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


# Ops whose output is not the program's data: uninitialised memory, or the profiler's handles.
_UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted",
                  "_empty_affine_quantized", "_empty_per_channel_affine_quantized", "resize_", "resize_as_"}


def _op_name(func) -> str:
    """"index_add_" for aten::index_add_; "" for a callable without a schema."""
    schema = getattr(func, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None else ""


def _untraced(func) -> bool:
    if getattr(func, "namespace", "") == "profiler":
        return True
    return _op_name(func) in _UNINITIALISED


# In-place ops that overwrite the whole of self: its old contents, maybe uninitialised memory (a
# buffer from torch.empty being filled), are no input of theirs (found by review).
_OVERWRITE_SELF = {"copy_", "fill_", "zero_", "uniform_", "normal_", "random_", "bernoulli_", "exponential_",
                   "geometric_", "log_normal_", "cauchy_"}


def _arguments(func, args, kwargs):
    """The call's arguments against the op's schema: (read, written) lists of tensors, by the
    schema's position, so that one tensor passed twice (torch.add(x, y, out=x)) is read as x and
    written as out (found by review: matched by identity, x's old contents were never digested).
    An out= argument, and self of an op in _OVERWRITE_SELF, is written only; an in-place argument
    is read and written (index_add_ adds to it)."""
    schema = getattr(func, "_schema", None)
    if schema is None:  # (no schema to say what it writes: every tensor argument is read)
        return _tensors((args, kwargs)), []
    read, written = [], []
    overwrites_self = _op_name(func) in _OVERWRITE_SELF
    for i, a in enumerate(schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(a.name)
        ts = _tensors(value)
        writes = a.alias_info is not None and a.alias_info.is_write
        if writes:
            written += ts
        out_only = writes and (getattr(a, "is_out", False) or a.kwarg_only or (i == 0 and overwrites_self))
        if not out_only:
            read += ts
    return read, written


def _signature(args, kwargs) -> str:
    """What the call's tensors' bytes do not say: every tensor's dtype and shape, every other
    argument's value (a type's name where its text could hold an address), as one digest."""
    leaves, _ = tree_flatten((args, kwargs))
    parts = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            parts.append(f"T {x.dtype} {tuple(x.shape)} {x.layout}")
        elif x is None or isinstance(x, (bool, int, float, complex, str, torch.dtype, torch.device, torch.layout,
                                         torch.memory_format)):
            parts.append(f"{type(x).__name__} {x!r}")
        elif isinstance(x, (tuple, list)) and all(v is None or isinstance(v, (bool, int, float)) for v in x):
            parts.append(f"{type(x).__name__} {list(x)!r}")  # a torch.Size, which the flattening keeps whole
        else:
            parts.append(f"{type(x).__module__}.{type(x).__qualname__}")
    parts.append("kwargs " + ",".join(sorted(kwargs)))
    return digest_bytes("\n".join(parts).encode())


def _is(t, ts):
    return any(t is u for u in ts)


# Where each trace file's rows stand in this process, so that a second ``Trace`` over the same file
# goes on after the first (found by audit: it started again at step 0 and the trace was refused).
_cursor = {}


def _key(path):
    return os.path.abspath(path)


class Trace(TorchDispatchMode):
    """Records every dispatched op while active. ``next_step()`` starts the next step."""

    def __init__(self, path=None):
        super().__init__()
        self.path = path if path is not None else os.environ.get("D9M_TRACE")
        if not self.path:
            raise RuntimeError("d9m_torch.Trace: no path given and D9M_TRACE is not set (d9m exec sets it)")
        self._key = _key(self.path)  # once: a chdir inside the block must not change it
        self.step, self.position = _cursor.get(self._key, (0, 0))
        self._out = None

    def __enter__(self):
        # After whatever this file's last block wrote, this object's own steps included (found by
        # review: `with t:` in a loop with t.next_step() between lost the steps).
        self.step, self.position = max(_cursor.get(self._key, (0, 0)), (self.step, self.position))
        self._out = open(self.path, "a", encoding="utf-8")
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _cursor[self._key] = (self.step, self.position)
            self._out.close()

    def next_step(self):
        self.step += 1
        self.position = 0
        _cursor[self._key] = max(_cursor.get(self._key, (0, 0)), (self.step, self.position))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _untraced(func):
            return func(*args, **kwargs)
        # The inputs as the op found them (found by audit: digested after it ran, an in-place op's
        # mutated input already differed, and a racing index_add_ was blamed on untraced code).
        read, written = _arguments(func, args, kwargs)
        inputs = [digest(t) for t in read]
        inputs.append(_signature(args, kwargs))
        result = func(*args, **kwargs)
        outputs = _tensors(result)
        outputs += [t for t in written if not _is(t, outputs)]  # what it wrote in place (_foreach_add_ returns nothing)
        if outputs:
            out = digest(outputs[0]) if len(outputs) == 1 else digest_bytes("".join(digest(o) + "\n" for o in outputs).encode())
            devices = {t.device.type for t in outputs}
            name = str(func)
            self._out.write(json.dumps({"step": self.step, "position": self.position, "name": name, "op": name,
                                        "variant": "torch." + "+".join(sorted(devices)), "inputs": inputs,
                                        "digest": out}) + "\n")
            self.position += 1
        return result
