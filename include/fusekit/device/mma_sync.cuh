#pragma once
// PTX wrappers of the sm_80 data path that the portable kernels share: 16-byte cp.async copies
// global → shared (with zero-fill) and the mma.sync m16n8k16 and m16n8k8 tensor-core ops with fp32
// accumulators.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace fusekit::device {

inline constexpr int kCpAsyncBytes = 16;

// Shared bytes at dst = valid ? the 16 bytes at gmem : 16 zero bytes (rows or columns beyond a
// matrix; a zero-filled copy reads no byte).
__device__ __forceinline__ void cp_async_16_shared(unsigned dst, const void* gmem, bool valid) {
  const int src_bytes = valid ? kCpAsyncBytes : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}
// The same to a generic pointer into shared memory.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  cp_async_16_shared(static_cast<unsigned>(__cvta_generic_to_shared(smem)), gmem, valid);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Whether a 16-bit input type runs the bf16 or the f16 flavour of mma.sync.
template <class T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> { static constexpr bool kBf16 = true; };
template <> struct MmaType<__half> { static constexpr bool kBf16 = false; };

// c += a·b for one m16n8k16 tile: a row-major (4 registers), b column-major (2), c fp32 (4).
template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// c += a·b for one m16n8k8 tile: a row-major (2 registers), b column-major (1), c fp32 (4).
template <bool kBf16>
__device__ __forceinline__ void mma_k8(float (&c)[4], unsigned a0, unsigned a1, unsigned b0) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
  }
}

}  // namespace fusekit::device
