#include "fusekit/reference/epilogue.hpp"

#include <algorithm>
#include <cmath>

#include "fusekit/reference/activation.hpp"
#include "fusekit/transfer.hpp"

namespace fusekit::reference {

EpilogueResult apply_epilogue(const EpilogueSpec& spec, const Matrix& acc, const EpilogueInputs& in) {
  EpilogueResult r;
  Matrix x = acc;
  for (const auto& node : spec.nodes) {
    const auto m = x.rows, n = x.cols;
    auto each = [&](auto&& f) {
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) x(i, j) = f(x(i, j), i, j);
    };
    switch (node.op) {
      case EpilogueOp::Scale: each([&](double v, auto, auto) { return node.p0 * v; }); break;
      case EpilogueOp::AddSource: each([&](double v, auto i, auto j) { return v + node.p0 * in.source(i, j); }); break;
      case EpilogueOp::ColumnBias: each([&](double v, auto, auto j) { return v + in.bias[static_cast<std::size_t>(j)]; }); break;
      case EpilogueOp::RowScale: each([&](double v, auto i, auto) { return v * in.row_scale[static_cast<std::size_t>(i)]; }); break;
      case EpilogueOp::ColumnScale: each([&](double v, auto, auto j) { return v * in.col_scale[static_cast<std::size_t>(j)]; }); break;
      case EpilogueOp::Residual: each([&](double v, auto i, auto j) { return v + in.residual(i, j); }); break;
      case EpilogueOp::Relu: each([](double v, auto, auto) { return relu(v); }); break;
      case EpilogueOp::GeluTanh: each([](double v, auto, auto) { return gelu_tanh(v); }); break;
      case EpilogueOp::GeluErf: each([](double v, auto, auto) { return gelu_erf(v); }); break;
      case EpilogueOp::Silu: each([](double v, auto, auto) { return silu(v); }); break;
      case EpilogueOp::SwiGlu:
      case EpilogueOp::GeGlu: {
        const auto block = static_cast<std::int64_t>(node.p0);
        Matrix y(m, n / 2);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n / 2; ++j) {
            const std::int64_t k = j / block, rr = j % block;
            const double gate = x(i, 2 * k * block + rr), up = x(i, 2 * k * block + block + rr);
            y(i, j) = (node.op == EpilogueOp::SwiGlu ? silu(gate) : gelu_tanh(gate)) * up;
          }
        x = std::move(y);
        break;
      }
      case EpilogueOp::Clamp: each([&](double v, auto, auto) { return std::clamp<double>(v, node.p0, node.p1); }); break;
      case EpilogueOp::Cast: each([&](double v, auto, auto) { return round_to(node.dtype, v); }); break;
      case EpilogueOp::QuantizeE4M3:
        // NaN kept, as the kernels record it (device/amax.cuh).
        for (double v : x.data) r.amax = std::isnan(r.amax) || std::abs(v) <= r.amax ? r.amax : std::abs(v);
        each([&](double v, auto, auto) { return round_to(DType::E4M3, v * in.quant_scale); });
        break;
      case EpilogueOp::StoreAux: r.aux = x; break;
    }
  }
  r.out = std::move(x);
  return r;
}

}  // namespace fusekit::reference
