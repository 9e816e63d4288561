"""PyTorch's own kernels for the catalogue ops it has, as ``d9m run --backend torch`` runs them.

Each entry maps a d9m op (its inputs in the catalogue's order and layout, its parameters) onto
the PyTorch call a framework user makes, so the same inputs go through PyTorch's kernel and the
output comes back in d9m's layout. ``prepare`` does once, untimed, what is not the op: moving the
inputs into PyTorch's layout (NHWC to NCHW), widening indices to int64, a forward pass whose
indices or saved tensors the backward needs. It returns the trial: a function that runs the op
and returns its output, which is what d9m times and digests.

A config PyTorch cannot express (TensorFlow's legacy resize coordinates, an asymmetric SAME
padding) raises ``Unsupported`` with the reason; so does a PyTorch without the op. The agreement
of every entry with d9m's serial reference is tested (suites/unit/torch_backend_test.cpp): an
entry that computed another function would fail there, never pass as deterministic.
"""
import math

import torch

aten = torch.ops.aten


class Unsupported(Exception):
    """This config cannot run on PyTorch: the case is UNSUPPORTED with this reason."""


def _nchw(t):
    # d9m's NHWC tensor as the NCHW tensor a PyTorch user holds (contiguous, as most are).
    return t.permute(0, 3, 1, 2).contiguous()


def _nhwc(t):
    return t.permute(0, 2, 3, 1).contiguous()


def _long(t):
    return t.to(torch.int64)


def _same_padding(size, k, stride, dilation, name):
    """TensorFlow's SAME padding on one axis, as PyTorch's symmetric padding, or Unsupported."""
    out = -(-size // stride)
    extent = (k - 1) * dilation + 1
    total = max((out - 1) * stride + extent - size, 0)
    if total % 2:
        raise Unsupported(f"SAME padding of {name} is asymmetric here ({total // 2} before, {total - total // 2} after); "
                          "PyTorch pads both sides equally")
    return total // 2


def _pad(params, size_h, size_w, kh, kw, dh=1, dw=1):
    if params["padding"] == "VALID":
        return [0, 0]
    return [_same_padding(size_h, kh, params["stride_h"], dh, "h"), _same_padding(size_w, kw, params["stride_w"], dw, "w")]


# ---- entries: prepare(inputs, params, out) -> trial ---------------------------------------------
# `inputs` are tensors on the device, in the op's argument order; `out` has .shape and .dtype.

def scatter_add(x, p, out):
    ref, idx, upd = x[0], _long(x[1]), x[2]
    return lambda: ref.clone().index_add_(0, idx, upd)


def scatter_nd_add(x, p, out):
    ref, idx, upd = x[0], _long(x[1]), x[2]
    i0, i1 = idx[:, 0].contiguous(), idx[:, 1].contiguous()
    return lambda: ref.clone().index_put_((i0, i1), upd, accumulate=True)


def unsorted_segment_sum(x, p, out):
    data, ids = x[0], _long(x[1])
    segments = p["num_segments"]
    # TensorFlow drops rows of negative id; PyTorch's scatter_add_ has no such rule, so those rows
    # are left out once, untimed.
    keep = (ids >= 0) & (ids < segments)
    data, ids = data[keep].contiguous(), ids[keep]
    index = ids[:, None].expand(-1, data.shape[1]).contiguous()
    return lambda: torch.zeros(out.shape, dtype=data.dtype, device=data.device).scatter_add_(0, index, data)


def cumsum(x, p, out):
    return lambda: torch.cumsum(x[0], 0)


def reduce_sum(x, p, out):
    return lambda: torch.sum(x[0]).reshape(1)


def bias_add_grad(x, p, out):
    # What autograd computes for a bias added over NHWC: the sum over every axis but the channel.
    return lambda: x[0].sum(dim=(0, 1, 2))


def relu(x, p, out):
    return lambda: torch.relu(x[0])


def relu_grad(x, p, out):
    return lambda: aten.threshold_backward(x[0], x[1], 0)


def sgd_update(x, p, out):
    lr = p["lr"]
    return lambda: torch.add(x[0], x[1], alpha=-lr)


def _bincount_keep(arr, bins):
    arr = _long(arr)
    # d9m ignores values outside [0, bins); PyTorch's bincount would count them, so they are left out once.
    return (arr >= 0) & (arr < bins)


def bincount(x, p, out):
    bins = p["bins"]
    arr = _long(x[0])[_bincount_keep(x[0], bins)]
    return lambda: torch.bincount(arr, minlength=bins)[:bins].to(torch.int32)


def bincount_weighted(x, p, out):
    bins = p["bins"]
    keep = _bincount_keep(x[0], bins)
    arr, weights = _long(x[0])[keep], x[1][keep].contiguous()
    return lambda: torch.bincount(arr, weights, minlength=bins)[:bins].to(out.dtype)


def matmul(x, p, out):
    a, b = x[0], x[1]
    layout = p["layout"]
    if layout == "TN":
        a = a.transpose(-1, -2)
    if layout == "NT":
        b = b.transpose(-1, -2)
    return lambda: torch.matmul(a, b)


def _sdpa():
    f = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if f is None:
        raise Unsupported(f"PyTorch {torch.__version__} has no scaled_dot_product_attention (it came in 2.0)")
    return f


def sdpa(x, p, out):
    f = _sdpa()
    q, k, v = x
    causal = p["causal"]
    return lambda: f(q, k, v, is_causal=causal)


def sdpa_bwd(x, p, out):
    f = _sdpa()
    q, k, v, d_o = (t.detach().requires_grad_(i < 3) for i, t in enumerate(x))
    causal = p["causal"]

    def trial():
        # PyTorch's backward needs its forward's saved tensors: the forward is rerun, as d9m's is.
        o = f(q, k, v, is_causal=causal)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), d_o)
        return torch.cat((dq, dk, dv), dim=2)
    return trial


def _resize_flags(p):
    ac, hp = p["align_corners"], p["half_pixel_centers"]
    if not ac and not hp:
        raise Unsupported("TensorFlow's legacy coordinates (align_corners and half_pixel_centers both false) have no "
                          "PyTorch equivalent")
    return ac


def resize_bilinear_grad(x, p, out):
    ac = _resize_flags(p)
    grads = _nchw(x[0])
    n, h, w, c = out.shape
    return lambda: _nhwc(aten.upsample_bilinear2d_backward(grads, [grads.shape[2], grads.shape[3]], [n, c, h, w], ac))


def resize_bicubic_grad(x, p, out):
    g = x[0]
    return lambda: aten.upsample_bicubic2d_backward(g, [g.shape[2], g.shape[3]], list(out.shape), p["align_corners"])


def resize_trilinear_grad(x, p, out):
    g = x[0]
    return lambda: aten.upsample_trilinear3d_backward(g, list(g.shape[2:]), list(out.shape), p["align_corners"])


def maxpool2d_bwd(x, p, out):
    orig_input, grad = _nchw(x[0]), _nchw(x[2])
    kh, kw = p["ksize_h"], p["ksize_w"]
    pad = _pad(p, orig_input.shape[2], orig_input.shape[3], kh, kw)
    if pad[0] > kh // 2 or pad[1] > kw // 2:
        raise Unsupported("PyTorch's max_pool2d pads at most half the window")
    stride = [p["stride_h"], p["stride_w"]]
    pooled, indices = aten.max_pool2d_with_indices(orig_input, [kh, kw], stride, pad, [1, 1], False)
    if list(pooled.shape) != list(grad.shape):
        raise Unsupported(f"PyTorch's max_pool2d makes {list(pooled.shape)} here, the op {list(grad.shape)}")
    return lambda: _nhwc(aten.max_pool2d_with_indices_backward(grad, orig_input, [kh, kw], stride, pad, [1, 1], False, indices))


def adaptive_avg_pool2d_bwd(x, p, out):
    g = x[0]
    shape = torch.zeros(out.shape, dtype=g.dtype, device=g.device)
    return lambda: aten._adaptive_avg_pool2d_backward(g, shape)


def adaptive_max_pool2d_bwd(x, p, out):
    g, inp, idx = x[0], x[1], _long(x[2])
    return lambda: aten.adaptive_max_pool2d_backward(g, inp, idx)


def _window3d(p, *names):
    return [p[f"{names[0]}_d"], p[f"{names[0]}_h"], p[f"{names[0]}_w"]]


def avg_pool3d_bwd(x, p, out):
    g = x[0]
    shape = torch.zeros(out.shape, dtype=g.dtype, device=g.device)
    k, s, pad = _window3d(p, "kernel"), _window3d(p, "stride"), _window3d(p, "padding")
    divisor = p["divisor_override"] or None
    return lambda: aten.avg_pool3d_backward(g, shape, k, s, pad, p["ceil_mode"], p["count_include_pad"], divisor)


def max_pool3d_bwd(x, p, out):
    g, inp, idx = x[0], x[1], _long(x[2])
    k, s, pad, dil = _window3d(p, "kernel"), _window3d(p, "stride"), _window3d(p, "padding"), _window3d(p, "dilation")
    return lambda: aten.max_pool3d_with_indices_backward(g, inp, k, s, pad, dil, p["ceil_mode"], idx)


def _pads(p):
    return [p["pad_left"], p["pad_right"], p["pad_top"], p["pad_bottom"]]


def reflection_pad2d_bwd(x, p, out):
    g = x[0]
    shape = torch.zeros(out.shape, dtype=g.dtype, device=g.device)
    return lambda: aten.reflection_pad2d_backward(g, shape, _pads(p))


def replication_pad2d_bwd(x, p, out):
    g = x[0]
    shape = torch.zeros(out.shape, dtype=g.dtype, device=g.device)
    return lambda: aten.replication_pad2d_backward(g, shape, _pads(p))


def _conv(p, input_shape, filter_shape):
    n, h, w, ci = input_shape
    kh, kw = filter_shape[0], filter_shape[1]
    dil = [p["dilation_h"], p["dilation_w"]]
    return [p["stride_h"], p["stride_w"]], _pad(p, h, w, kh, kw, dil[0], dil[1]), dil


def _oihw(hwio):
    return hwio.permute(3, 2, 0, 1).contiguous()


def conv2d_bwd_data(x, p, out):
    weight, dy = _oihw(x[0]), _nchw(x[1])
    stride, pad, dil = _conv(p, out.shape, x[0].shape)
    n, h, w, ci = out.shape
    shape = torch.zeros((n, ci, h, w), dtype=dy.dtype, device=dy.device)

    def trial():
        dx = aten.convolution_backward(dy, shape, weight, None, stride, pad, dil, False, [0, 0], 1, [True, False, False])[0]
        return _nhwc(dx)
    return trial


def conv2d_bwd_filter(x, p, out):
    inp, dy = _nchw(x[0]), _nchw(x[1])
    stride, pad, dil = _conv(p, x[0].shape, out.shape)
    kh, kw, ci, co = out.shape
    shape = torch.zeros((co, ci, kh, kw), dtype=dy.dtype, device=dy.device)

    def trial():
        dw = aten.convolution_backward(dy, inp, shape, None, stride, pad, dil, False, [0, 0], 1, [False, True, False])[1]
        return dw.permute(2, 3, 1, 0).contiguous()
    return trial


def _loss_args(x, p):
    weight = x[2] if p["weighted"] else None
    return x[0], _long(x[1]), dict(weight=weight, ignore_index=p["ignore_index"], reduction=p["reduction"])


def nll_loss(x, p, out):
    # Input [N, C] or [N, C, H, W] as PyTorch holds it (the loss family is PyTorch's layout).
    inp, target, kw = _loss_args(x, p)
    return lambda: torch.nn.functional.nll_loss(inp, target, **kw).reshape(1)


def softmax_cross_entropy(x, p, out):
    logits, target, kw = _loss_args(x, p)
    return lambda: torch.nn.functional.cross_entropy(logits, target, **kw).reshape(1)


def softmax_cross_entropy_grad(x, p, out):
    logits, target, kw = _loss_args(x, p)
    logits = logits.detach().requires_grad_(True)

    def trial():
        # loss.backward() for the loss of the same parameters: forward and backward, as a step runs them.
        loss = torch.nn.functional.cross_entropy(logits, target, **kw)
        return torch.autograd.grad(loss, logits)[0]
    return trial


def embedding_bag_bwd(x, p, out):
    # nn.EmbeddingBag's weight gradient: its forward once (untimed; in mode max it finds each bag's
    # argmax from the weight input, the first maximum, as d9m's fill does), then the backward.
    indices, offsets = _long(x[0]), _long(x[1])
    mode = p["mode"]
    rest = x[2:]
    if mode == "max":
        weight, rest = rest[0], rest[2:]  # d9m's max_indices are the forward's: PyTorch's forward makes its own
    else:
        weight = torch.zeros(out.shape, dtype=out.dtype, device=indices.device)
    grad, psw = rest[0], (rest[1] if p["per_sample_weights"] else None)
    weight = weight.detach().requires_grad_(True)
    padding = p["padding_idx"] if p["padding_idx"] >= 0 else None
    y = torch.nn.functional.embedding_bag(indices, weight, offsets, mode=mode, per_sample_weights=psw, padding_idx=padding)
    return lambda: torch.autograd.grad(y, weight, grad, retain_graph=True)[0]


def ctc_loss_bwd(x, p, out):
    # reduction='none' and the upstream gradient grad_out, so the gradient in log_probs is PyTorch's
    # backward as ctc.h describes it. The forward reruns each trial: the backward needs its alphas.
    log_probs, targets, input_lengths, target_lengths, grad_out = x
    log_probs = log_probs.detach().requires_grad_(True)
    targets, input_lengths, target_lengths = _long(targets), _long(input_lengths), _long(target_lengths)

    def trial():
        loss = torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none",
                                            zero_infinity=False)
        return torch.autograd.grad(loss, log_probs, grad_out)[0]
    return trial


def resampler_grad_data(x, p, out):
    if p["semantics"] != "grid_sample":
        raise Unsupported("TensorFlow's resampler (pixel coordinates, its own corner rule) is not a PyTorch op; "
                          "the grid_sample semantics is")
    grid, grad = x[0], x[1]
    # grad_input does not depend on the input's values: zeros of its shape, and the forward once.
    inp = torch.zeros(out.shape, dtype=out.dtype, device=grid.device).requires_grad_(True)
    y = torch.nn.functional.grid_sample(inp, grid, mode="bilinear", padding_mode="zeros", align_corners=p["align_corners"])
    return lambda: torch.autograd.grad(y, inp, grad, retain_graph=True)[0]


OPS = {f.__name__: f for f in (
    scatter_add, scatter_nd_add, unsorted_segment_sum, cumsum, reduce_sum, bias_add_grad, relu, relu_grad, sgd_update,
    bincount, bincount_weighted, matmul, sdpa, sdpa_bwd, resize_bilinear_grad, resize_bicubic_grad, resize_trilinear_grad,
    maxpool2d_bwd, adaptive_avg_pool2d_bwd, adaptive_max_pool2d_bwd, avg_pool3d_bwd, max_pool3d_bwd, reflection_pad2d_bwd,
    replication_pad2d_bwd, conv2d_bwd_data, conv2d_bwd_filter, nll_loss, softmax_cross_entropy, softmax_cross_entropy_grad,
    embedding_bag_bwd, ctc_loss_bwd, resampler_grad_data)}
OPS["matmul_batched"] = matmul

# The entries whose trial differentiates through autograd (the worker records a graph for them).
AUTOGRAD = {"sdpa_bwd", "softmax_cross_entropy_grad", "embedding_bag_bwd", "ctc_loss_bwd", "resampler_grad_data"}

# The ops whose CUDA kernels PyTorch's reproducibility notes call nondeterministic by default:
# use_deterministic_algorithms(True) switches them to a deterministic path or makes them raise
# (docs "torch.use_deterministic_algorithms"; ../shared/REFERENCE.md "Frameworks today"). Its notes
# are about CUDA tensors; on the CPU PyTorch states nothing either way.
CUDA_NONDETERMINISTIC = {
    "scatter_add": "index_add_ on CUDA",
    "scatter_nd_add": "index_put_(accumulate=True) on CUDA",
    "unsorted_segment_sum": "scatter_add_ on CUDA",
    "cumsum": "cumsum of floats on CUDA",
    "bincount_weighted": "bincount with weights on CUDA",
    "resize_bilinear_grad": "upsample_bilinear2d backward on CUDA",
    "resize_bicubic_grad": "upsample_bicubic2d backward on CUDA",
    "resize_trilinear_grad": "upsample_trilinear3d backward on CUDA",
    "adaptive_avg_pool2d_bwd": "adaptive_avg_pool2d backward on CUDA",
    "adaptive_max_pool2d_bwd": "adaptive_max_pool2d backward on CUDA",
    "avg_pool3d_bwd": "avg_pool3d backward on CUDA",
    "max_pool3d_bwd": "max_pool3d backward on CUDA",
    "reflection_pad2d_bwd": "reflection_pad2d backward on CUDA",
    "replication_pad2d_bwd": "replication_pad2d backward on CUDA",
    "conv2d_bwd_data": "cuDNN convolution backward on CUDA (torch.backends.cudnn.deterministic off)",
    "conv2d_bwd_filter": "cuDNN convolution backward on CUDA (torch.backends.cudnn.deterministic off)",
    # The ops use_deterministic_algorithms(True) makes throw on CUDA ("normally-nondeterministic").
    "ctc_loss_bwd": "CTCLoss backward on CUDA",
    "resampler_grad_data": "grid_sample backward on CUDA",
}


def cuda_claim(op, params):
    """PyTorch's documented nondeterminism of this op on CUDA with these parameters: the reason, or
    None where its notes make no claim. Some claims hold for some configs only (found by review: a
    claim keyed by op alone named mode='max' on every EmbeddingBag config)."""
    if op in CUDA_NONDETERMINISTIC:
        return CUDA_NONDETERMINISTIC[op]
    if op == "embedding_bag_bwd" and params.get("mode") == "max":
        # embedding_bag_backward_cuda_max alerts; sum and mean sort, deterministic, and run in its deterministic mode.
        return "EmbeddingBag backward on CUDA with mode='max'"
    spatial = params.get("h", 0) > 0
    # NLLLoss: the notes name it whole; its CUDA forward races (atomicAdd of block sums) only for inputs of
    # more than two dimensions, nll_loss2d, and that is where it alerts. [N, C] is one block in a fixed order.
    if op in ("nll_loss", "softmax_cross_entropy") and spatial:
        return ("NLLLoss on CUDA (nll_loss2d, inputs of more than two dimensions)" if op == "nll_loss"
                else "cross_entropy's NLLLoss on CUDA (nll_loss2d, inputs of more than two dimensions)")
    # The gradient's trial reruns that forward, and a mean's gradient divides by the total weight
    # it sums with atomicAdd.
    if op == "softmax_cross_entropy_grad" and spatial and params.get("reduction") == "mean":
        return ("cross_entropy's NLLLoss on CUDA (nll_loss2d, inputs of more than two dimensions), whose total weight "
                "the mean's gradient divides by")
    return None

MATH = ("default", "tf32", "fp32-strict")
