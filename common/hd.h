// PRETRAIN_HD marks a function that both backends run: the CPU backend calls it from its loops,
// nvcc compiles it into the CUDA kernels too. One body, so the CPU tests check the GPU arithmetic.
#pragma once

#if defined(__CUDACC__)
#define PRETRAIN_HD __host__ __device__
#else
#define PRETRAIN_HD
#endif
