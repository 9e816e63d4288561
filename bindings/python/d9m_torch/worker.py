"""``python3 -m d9m_torch.worker``: PyTorch's kernels as a d9m backend (``d9m run --backend torch``).

d9m (harness/exec/torch_executor.cpp) starts this process and speaks to it in JSON lines on
stdin and stdout; bulk data goes through files in a folder d9m made for it:

  worker -> d9m  {"hello": {"torch": version, "device": ..., "ops": [...], ...}}   first, unasked
                 {"error": message}                 instead, when PyTorch cannot be used; it exits
  d9m -> worker  {"prepare": {"op", "variant", "params", "dtype", "math",
                              "inputs": [{"name", "dtype", "shape", "path"}], "output": {...}}}
  worker -> d9m  {"prepared": {"claim": {...} | null}}   or {"unsupported": why} or {"error": why}
  d9m -> worker  {"trial": k}
  worker -> d9m  {"done": k, "elapsed_ns": ns}       the output's bytes are in output.path
                 {"error": why}

The inputs are d9m's own (its fill, its seed), as raw bytes; the output goes back as raw bytes
in d9m's layout, and d9m digests it and compares it with trial 0 as it does its own variants'.
"torch.deterministic" runs under torch.use_deterministic_algorithms(True): an op PyTorch has no
deterministic algorithm for raises, and the case is UNSUPPORTED with PyTorch's message.
"""
import json
import os
import re
import sys
import time


def _die_with_parent():
    # A d9m worker killed by its watchdog must not leave this process computing on (Linux only).
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


# PyTorch's errors for an op with no kernel at a dtype on this device, in the three forms its
# dispatch macros and argument checks word them (PyTorch 1.13 and 2.x):
#   "addmm_impl_cpu_" not implemented for 'Half'
#   grid_sampler_2d_cpu not implemented for Half
#   Expected tensor for argument #1 'weight' to have one of the following scalar types: Half,
#   Float, Double; but got CPUBFloat16Type instead (while checking arguments for embedding_bag)
# Matched whole (a kernel name, a dtype name), so that no other error that happens to contain the
# words passes as UNSUPPORTED. A fact about the stack, reported as such; nothing of d9m's. The third
# form only where the expected types are float types: "Long, Int" is an index of the wrong dtype,
# a bug of d9m_torch's mapping, which must read ERROR (found by review).
MISSING_DTYPE_KERNEL = re.compile(r"\"[^\"\n]+\" not implemented for '[^'\n]+'"
                                  r"|^\w+ not implemented for [A-Za-z0-9]+$"
                                  r"|^Expected tensor for argument #\d+ '\w+' to have one of the following scalar types: "
                                  r"(?=[A-Za-z0-9, ]*\b(?:Half|Float|Double|BFloat16)\b)[A-Za-z0-9, ]+; but got \w+ instead")


def main():
    _die_with_parent()
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 0
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything PyTorch prints goes to stderr, never into the protocol

    def send(msg):
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    try:
        import torch
        from d9m_torch import ops
    except Exception as e:  # no PyTorch here: every torch case is SKIPPED with this reason
        send({"error": f"{sys.executable} cannot import torch: {type(e).__name__}: {e}"})
        return 0

    dtypes = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
              "i32": torch.int32, "i64": torch.int64}
    if threads > 0:
        torch.set_num_threads(threads)  # d9m's --threads, as its own CPU variants get
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    hello = {"torch": torch.__version__, "device": device.type, "python": sys.version.split()[0],
             "ops": sorted(ops.OPS), "threads": torch.get_num_threads()}
    if device.type == "cuda":
        hello["device_name"] = torch.cuda.get_device_name(device)
        hello["cuda"] = torch.version.cuda
        hello["cudnn"] = torch.backends.cudnn.version()
    send({"hello": hello})
    defaults = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)

    class Out:
        def __init__(self, d):
            self.shape, self.dtype, self.path = tuple(d["shape"]), dtypes[d["dtype"]], d["path"]

    def load(d):
        with open(d["path"], "rb") as f:
            data = bytearray(f.read())
        t = torch.frombuffer(data, dtype=dtypes[d["dtype"]]) if data else torch.empty(0, dtype=dtypes[d["dtype"]])
        return t.reshape(d["shape"]).to(device)

    trial = out = None
    grad = False  # only a backward through autograd (ops.AUTOGRAD) records a graph
    for line in sys.stdin:
        msg = json.loads(line)
        if "prepare" in msg:
            req = msg["prepare"]
            trial = None
            deterministic = req.get("variant") == "torch.deterministic"
            grad = req.get("op") in ops.AUTOGRAD
            try:
                entry = ops.OPS.get(req["op"])
                if entry is None:
                    raise ops.Unsupported(f"d9m_torch has no PyTorch call for {req['op']}")
                if req["math"] not in ops.MATH:
                    raise ops.Unsupported(f"math mode {req['math']} has no PyTorch setting")
                torch.use_deterministic_algorithms(deterministic)
                torch.backends.cudnn.deterministic = deterministic
                torch.backends.cudnn.benchmark = False
                tf32 = {"default": defaults, "tf32": (True, True), "fp32-strict": (False, False)}[req["math"]]
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
                out = Out(req["output"])
                inputs = [load(d) for d in req["inputs"]]
                with torch.set_grad_enabled(grad):
                    trial = entry(inputs, req["params"], out)
                    check = trial()  # untimed: PyTorch raises here for an op it has no deterministic path for
                if tuple(check.shape) != out.shape or check.dtype != out.dtype:
                    raise RuntimeError(f"d9m_torch's {req['op']} gave {tuple(check.shape)} {check.dtype}, "
                                       f"the op's output is {out.shape} {out.dtype}")
                claim = None
                reason = ops.cuda_claim(req["op"], req["params"])
                if device.type == "cuda" and not deterministic and reason is not None:
                    claim = {"determinism": "nondeterministic", "source": "vendor-doc",
                             "reason": "PyTorch's reproducibility notes: " + reason +
                                       " is nondeterministic unless torch.use_deterministic_algorithms(True)"}
                send({"prepared": {"claim": claim}})
            except ops.Unsupported as e:
                send({"unsupported": str(e)})
            except RuntimeError as e:
                text = str(e)
                first = text.splitlines()[0] if text else ""
                if deterministic and "deterministic" in text:
                    # PyTorch's own answer: it has no deterministic algorithm for this op here.
                    send({"unsupported": "PyTorch " + torch.__version__ + ": " + first})
                # PyTorch has no kernel for this dtype on this device: a fact, not a failure.
                elif MISSING_DTYPE_KERNEL.search(first):
                    send({"unsupported": f"PyTorch {torch.__version__} on {device.type}: {first}"})
                else:
                    send({"error": f"PyTorch {torch.__version__}: {type(e).__name__}: {first}"})
            except Exception as e:
                send({"error": f"d9m_torch: {type(e).__name__}: {e}"})
        elif "trial" in msg:
            try:
                if trial is None:
                    raise RuntimeError("a trial before a prepared case")
                sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
                sync()
                start = time.perf_counter_ns()
                with torch.set_grad_enabled(grad):
                    result = trial()
                sync()
                elapsed = time.perf_counter_ns() - start
                data = result.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
                with open(out.path, "wb") as f:
                    f.write(data)
                send({"done": msg["trial"], "elapsed_ns": elapsed})
            except Exception as e:
                send({"error": f"PyTorch {torch.__version__}: {type(e).__name__}: {e}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
