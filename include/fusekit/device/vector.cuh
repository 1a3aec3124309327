#pragma once
// 16-byte vectors of any element type: the unit of every coalesced load and store.
#include <cstdint>

#include <cuda_runtime.h>

namespace fusekit::device {

inline constexpr int kVectorBytes = 16;

template <class T>
union Vector {
  static constexpr int kElements = kVectorBytes / sizeof(T);
  uint4 raw;
  T e[kElements];
};

}  // namespace fusekit::device
