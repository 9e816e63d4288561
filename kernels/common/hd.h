// Code that runs on both the host and the device: the per-element maths and the scatter-form
// enumerators of every op live in headers as D9M_HD functions, so the CPU and CUDA variants
// perform literally the same float operations (the build disables contraction on both sides).
#pragma once

#if defined(__CUDACC__)
#define D9M_HD __host__ __device__
#else
#define D9M_HD
#endif
