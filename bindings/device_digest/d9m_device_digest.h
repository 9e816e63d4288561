/* d9m-digest-v1 of a buffer in GPU memory, computed on the GPU by d9m's own kernels
 * (harness/core/gpu_digest.cu), for programs outside d9m: the PyTorch hook
 * (bindings/python/d9m_torch) calls it through ctypes for CUDA tensors, so a traced op's output
 * is digested where it lies instead of being copied to the host first. The digest is the same
 * as d9m's host digest of the same bytes (DESIGN.md, "Digest: d9m-digest-v1").
 *
 * A plain C interface, so that any language's foreign-function layer can call it. */
#ifndef D9M_DEVICE_DIGEST_H
#define D9M_DEVICE_DIGEST_H

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the digest of `bytes` bytes at device pointer `data` (on CUDA device `device`) into
 * `hex_out` as 32 lowercase hex digits and a terminating NUL. The work is queued on `stream` (a
 * cudaStream_t, or NULL for the legacy default stream) behind what is already queued there, so
 * the caller's producing kernels finish first, and the call returns when the digest is on the
 * host. Returns 0, or -1 with a message (NUL-terminated, cut to `error_len` bytes) in `error`:
 * no device, a pointer the device cannot read, a CUDA error. Thread-safe. */
int d9m_device_digest(const void* data, unsigned long long bytes, int device, void* stream, char* hex_out, char* error,
                      unsigned long long error_len);

#ifdef __cplusplus
}
#endif
#endif
