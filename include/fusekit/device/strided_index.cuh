#pragma once
// Logical element index -> element offset for a TensorView of rank <= 4, in device code.
#include <cstdint>

#include "fusekit/tensor.hpp"

namespace fusekit::device {

struct StridedIndex {
  int rank;
  std::int64_t shape[kMaxRank];
  std::int64_t strides[kMaxRank];

  static StridedIndex of(const TensorView& t) {
    StridedIndex s{};
    s.rank = t.rank;
    for (int d = 0; d < kMaxRank; ++d) {
      s.shape[d] = t.shape[d];
      s.strides[d] = t.strides[d];
    }
    return s;
  }

  __device__ std::int64_t offset(std::int64_t linear) const {
    std::int64_t off = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < rank) {
        off += (linear % shape[d]) * strides[d];
        linear /= shape[d];
      }
    }
    return off;
  }
};

}  // namespace fusekit::device
