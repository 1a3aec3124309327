#pragma once
// Shared by GPU tests: host copies of device results and the relative error they are judged by.
#include <cmath>
#include <cstdint>
#include <vector>

#include "fusekit/reference/host_matrix.hpp"
#include "fusekit/tensor.hpp"
#include "fusekit/transfer.hpp"

namespace fusekit::testing {

// ‖got − want‖₂ / ‖want‖₂ (‖got − want‖₂ when want is all zeros); any NaN or ±Inf in `got`
// gives +Inf, so an unwritten (poisoned) element can never pass, and so does a length other
// than want's (a result cut short is not a match).
inline double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  return ref == 0 ? std::sqrt(diff) : std::sqrt(diff / ref);
}

// A packed device tensor's bytes (synchronous), to compare bit patterns.
inline std::vector<std::uint8_t> bit_pattern(const TensorView& t) {
  return download_bytes(TensorView::contiguous(t.data, DType::U8, {static_cast<std::int64_t>(t.span_bytes())}));
}

// The last two dimensions of a device tensor as a host matrix of doubles.
inline reference::Matrix to_matrix(const TensorView& t) {
  reference::Matrix m(t.size(-2), t.size(-1));
  m.data = download(t);
  return m;
}

}  // namespace fusekit::testing
