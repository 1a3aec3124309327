#include "fusekit/transfer.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "../core/parallel.hpp"
#include "fusekit/error.hpp"

namespace fusekit {

namespace {

double to_double(DType t, const unsigned char* p) {
  switch (t) {
    case DType::F32: { float v; std::memcpy(&v, p, sizeof v); return v; }
    case DType::F16: { __half v; std::memcpy(&v, p, sizeof v); return __half2float(v); }
    case DType::BF16: { __nv_bfloat16 v; std::memcpy(&v, p, sizeof v); return __bfloat162float(v); }
    case DType::E4M3: { __nv_fp8_e4m3 v; std::memcpy(&v, p, sizeof v); return float(v); }
    case DType::E5M2: { __nv_fp8_e5m2 v; std::memcpy(&v, p, sizeof v); return float(v); }
    case DType::U8: return *p;
  }
  return 0;
}

void from_double(DType t, double d, unsigned char* p) {
  const float f = static_cast<float>(d);
  switch (t) {
    case DType::F32: std::memcpy(p, &f, sizeof f); break;
    case DType::F16: { __half v = __float2half_rn(f); std::memcpy(p, &v, sizeof v); break; }
    case DType::BF16: { __nv_bfloat16 v = __float2bfloat16_rn(f); std::memcpy(p, &v, sizeof v); break; }
    case DType::E4M3: { __nv_fp8_e4m3 v(f); std::memcpy(p, &v, sizeof v); break; }
    case DType::E5M2: { __nv_fp8_e5m2 v(f); std::memcpy(p, &v, sizeof v); break; }
    case DType::U8: *p = static_cast<unsigned char>(d); break;
  }
}

// Visits the byte offset of elements [begin, end) in logical row-major order.
template <class F>
void for_each_offset(const TensorView& t, std::int64_t begin, std::int64_t end, F&& f) {
  for (std::int64_t i = begin; i < end; ++i) {
    std::int64_t rest = i, off = 0;
    for (int d = t.rank - 1; d >= 0; --d) {
      off += (rest % t.shape[d]) * t.strides[d];
      rest /= t.shape[d];
    }
    f(i, static_cast<std::size_t>(off) * t.element_size());
  }
}

std::vector<unsigned char> fetch_span(const TensorView& t) {
  std::vector<unsigned char> raw(t.span_bytes());
  if (!raw.empty()) check_cuda(cudaMemcpy(raw.data(), t.data, raw.size(), cudaMemcpyDeviceToHost), "download");
  return raw;
}

}  // namespace

std::vector<double> download(const TensorView& t) {
  check::device_tensor("t", t);
  auto raw = fetch_span(t);
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  detail::parallel_for(t.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
    for_each_offset(t, begin, end, [&](std::int64_t i, std::size_t off) {
      out[static_cast<std::size_t>(i)] = to_double(t.dtype, &raw[off]);
    });
  });
  return out;
}

std::vector<std::uint8_t> download_bytes(const TensorView& t) {
  check::device_tensor("t", t);
  check::dtype("t", t, {DType::U8});
  auto raw = fetch_span(t);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(t.numel()));
  for_each_offset(t, 0, t.numel(), [&](std::int64_t i, std::size_t off) { out[static_cast<std::size_t>(i)] = raw[off]; });
  return out;
}

void upload(std::span<const double> values, const TensorView& t) {
  check::device_tensor("t", t);
  require(static_cast<std::int64_t>(values.size()) == t.numel(), "values size", t.numel(), values.size());
  // Read the span first so gaps between strided rows keep their contents.
  auto raw = fetch_span(t);
  for_each_offset(t, 0, t.numel(),
                  [&](std::int64_t i, std::size_t off) { from_double(t.dtype, values[static_cast<std::size_t>(i)], &raw[off]); });
  if (!raw.empty()) check_cuda(cudaMemcpy(t.data, raw.data(), raw.size(), cudaMemcpyHostToDevice), "upload");
}

double round_to(DType t, double v) {
  unsigned char buf[sizeof(float)];
  from_double(t, v, buf);
  return to_double(t, buf);
}

}  // namespace fusekit
