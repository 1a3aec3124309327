// CPU reference of fusekit::gemm: double accumulation, then the cuBLASLt epilogue per element.
// D = epilogue(scale_ab·alpha·op(A)·op(B) + beta·C)
#include "fusekit/reference/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>

#include "fusekit/reference/activation.hpp"

namespace fusekit::reference {

namespace {

constexpr std::int64_t kBitsPerByte = 8;
// NOTE: cuBLASLt wants ReLU bit-mask rows in multiples of 128 bits. Kept local (rather than
// calling fusekit::relu_mask_row_bytes) so this file links without the rest of the library.
constexpr std::int64_t kReluMaskRowBits = 128;
constexpr std::int64_t default_mask_row_bytes(std::int64_t n) {
  return (n + kReluMaskRowBits - 1) / kReluMaskRowBits * (kReluMaskRowBits / kBitsPerByte);
}

// NOTE: B is packed kPanelCols columns at a time into a [cols, K] panel so every dot product
// reads two contiguous K-vectors; at K = 4096 a panel is 2 MiB and stays in cache while all of
// the packed A rows stream past it, instead of streaming all of B once per row of A.
constexpr std::int64_t kPanelCols = 64;
// NOTE: K is walked kDepth at a time so a kTile-row slice of A (8 KiB) stays in L1 while it
// meets every column of the panel; each sum still runs over k in order.
constexpr std::int64_t kDepth = 256;
// Register block of the dot-product kernel: kTile rows of A against kTile columns of B, so
// each loaded element feeds kTile multiply-adds.
constexpr std::int64_t kTile = 4;
// NOTE: below this many multiply-adds per thread, starting a thread costs more than it saves.
constexpr std::int64_t kMinMacsPerThread = std::int64_t{1} << 24;

struct Shape {
  std::int64_t m = 0, n = 0, k = 0;
};

enum class Activation : std::uint8_t { Identity, Relu, Gelu, ReluGrad, GeluGrad };

struct Traits {
  Activation activation;
  BiasRole bias;
  AuxRole aux;
};

// NOTE: the reference spells out each epilogue itself instead of calling fusekit::bias_role and
// aux_role, so that a mistake in the library's tables cannot hide in both sides of a check.
constexpr Traits traits(Epilogue e) {
  using A = Activation;
  switch (e) {
    case Epilogue::Default: return {A::Identity, BiasRole::None, AuxRole::None};
    case Epilogue::Relu: return {A::Relu, BiasRole::None, AuxRole::None};
    case Epilogue::ReluAux: return {A::Relu, BiasRole::None, AuxRole::ReluMaskOutput};
    case Epilogue::Bias: return {A::Identity, BiasRole::Input, AuxRole::None};
    case Epilogue::ReluBias: return {A::Relu, BiasRole::Input, AuxRole::None};
    case Epilogue::ReluAuxBias: return {A::Relu, BiasRole::Input, AuxRole::ReluMaskOutput};
    case Epilogue::DRelu: return {A::ReluGrad, BiasRole::None, AuxRole::ReluMaskInput};
    case Epilogue::DReluBGrad: return {A::ReluGrad, BiasRole::GradOutput, AuxRole::ReluMaskInput};
    case Epilogue::Gelu: return {A::Gelu, BiasRole::None, AuxRole::None};
    case Epilogue::GeluAux: return {A::Gelu, BiasRole::None, AuxRole::PreactOutput};
    case Epilogue::GeluBias: return {A::Gelu, BiasRole::Input, AuxRole::None};
    case Epilogue::GeluAuxBias: return {A::Gelu, BiasRole::Input, AuxRole::PreactOutput};
    case Epilogue::DGelu: return {A::GeluGrad, BiasRole::None, AuxRole::PreactInput};
    case Epilogue::DGeluBGrad: return {A::GeluGrad, BiasRole::GradOutput, AuxRole::PreactInput};
    case Epilogue::BGradA:
    case Epilogue::BGradB: return {A::Identity, BiasRole::GradOutput, AuxRole::None};
  }
  throw std::invalid_argument("reference::gemm: unknown epilogue");
}

// Whether to sum D over its rows for DRELU_BGRAD / DGELU_BGRAD (only the full problem can).
enum class ColumnSums : std::uint8_t { Skip, Compute };

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference::gemm: " + what);
}

// NOTE: appended piece by piece; "[" + std::to_string(...) trips GCC 12's false -Wrestrict at -O3.
std::string dims(const Matrix& m) {
  std::string s(1, '[');
  s.append(std::to_string(m.rows)).append(", ").append(std::to_string(m.cols)).append("]");
  return s;
}

Shape shape_of(const GemmProblem& p) {
  const bool ta = p.trans_a == Transpose::Yes;
  return {ta ? p.a.cols : p.a.rows, p.trans_b == Transpose::Yes ? p.b.rows : p.b.cols,
          ta ? p.a.rows : p.a.cols};
}

void check_problem(const GemmProblem& p, Traits t, Shape s, std::int64_t mask_row_bytes) {
  require(s.k == (p.trans_b == Transpose::Yes ? p.b.cols : p.b.rows),
          "inner dimensions differ: a " + dims(p.a) + ", b " + dims(p.b));
  if (p.beta != 0.0 && !p.c.empty())
    require(p.c.rows == s.m && p.c.cols == s.n, "c must be [M, N], got " + dims(p.c));
  if (t.bias == BiasRole::Input)
    require(std::ssize(p.bias) == s.n, "bias must have N = " + std::to_string(s.n) + " entries");
  if (t.aux == AuxRole::PreactInput)
    require(p.preact_in.rows == s.m && p.preact_in.cols == s.n,
            "preact_in must be [M, N], got " + dims(p.preact_in));
  if (t.aux == AuxRole::ReluMaskInput || t.aux == AuxRole::ReluMaskOutput)
    require(mask_row_bytes * kBitsPerByte >= s.n, "mask_row_bytes too small for N columns");
  if (t.aux == AuxRole::ReluMaskInput)
    require(std::ssize(p.relu_mask_in) >= s.m * mask_row_bytes,
            "relu_mask_in must hold M rows of mask_row_bytes");
}

// Row r of the result is op(A)[rows[r], :].
Matrix pack_a_rows(const GemmProblem& p, Shape s, std::span<const std::int64_t> rows) {
  Matrix packed(std::ssize(rows), s.k);
  for (std::int64_t r = 0; r < packed.rows; ++r) {
    const std::int64_t i = rows[static_cast<std::size_t>(r)];
    require(i >= 0 && i < s.m, "row " + std::to_string(i) + " outside [0, M)");
    for (std::int64_t k = 0; k < s.k; ++k)
      packed(r, k) = p.trans_a == Transpose::Yes ? p.a(k, i) : p.a(i, k);
  }
  return packed;
}

// panel[c·K + k] = op(B)[k, first + c] for c < count; the inner loops walk B's stored rows.
void pack_b_panel(const GemmProblem& p, Shape s, std::int64_t first, std::int64_t count,
                  std::vector<double>& panel) {
  const auto at = [&](std::int64_t c, std::int64_t k) -> double& {
    return panel[static_cast<std::size_t>(c * s.k + k)];
  };
  if (p.trans_b == Transpose::Yes) {
    for (std::int64_t c = 0; c < count; ++c)
      for (std::int64_t k = 0; k < s.k; ++k) at(c, k) = p.b(first + c, k);
  } else {
    for (std::int64_t k = 0; k < s.k; ++k)
      for (std::int64_t c = 0; c < count; ++c) at(c, k) = p.b(k, first + c);
  }
}

// out[i·ld + j] += Σ_{k < depth} a[i·K + k]·b[j·K + k] for a Rows × Cols block (rows K apart).
template <std::int64_t Rows, std::int64_t Cols>
void dot_block(const double* a, const double* b, std::int64_t k_len, std::int64_t depth,
               double* out, std::int64_t ld) {
  double acc[Rows][Cols];
  for (std::int64_t i = 0; i < Rows; ++i)
    for (std::int64_t j = 0; j < Cols; ++j) acc[i][j] = out[i * ld + j];
  for (std::int64_t k = 0; k < depth; ++k)
    for (std::int64_t i = 0; i < Rows; ++i)
      for (std::int64_t j = 0; j < Cols; ++j) acc[i][j] += a[i * k_len + k] * b[j * k_len + k];
  for (std::int64_t i = 0; i < Rows; ++i)
    for (std::int64_t j = 0; j < Cols; ++j) out[i * ld + j] = acc[i][j];
}

// out[:, first : first + count] += packed_a · panelᵀ; out starts at zero.
void multiply_panel(const Matrix& packed_a, const std::vector<double>& panel, std::int64_t first,
                    std::int64_t count, Matrix& out) {
  const std::int64_t k_len = packed_a.cols;
  for (std::int64_t k0 = 0; k0 < k_len; k0 += kDepth) {
    const std::int64_t depth = std::min(kDepth, k_len - k0);
    for (std::int64_t r0 = 0; r0 < packed_a.rows; r0 += kTile) {
      const std::int64_t rows = std::min(kTile, packed_a.rows - r0);
      for (std::int64_t c0 = 0; c0 < count; c0 += kTile) {
        const std::int64_t cols = std::min(kTile, count - c0);
        const double* a = &packed_a.data[static_cast<std::size_t>(r0 * k_len + k0)];
        const double* b = &panel[static_cast<std::size_t>(c0 * k_len + k0)];
        double* o = &out(r0, first + c0);
        if (rows == kTile && cols == kTile) {
          dot_block<kTile, kTile>(a, b, k_len, depth, o, out.cols);
          continue;
        }
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j)
            dot_block<1, 1>(a + i * k_len, b + j * k_len, k_len, depth, o + i * out.cols + j,
                            out.cols);
      }
    }
  }
}

// out[r, j] = Σ_k packed_a[r, k]·op(B)[k, j]; threads take interleaved column panels, so each
// element is summed in the same order whatever the thread count.
void multiply(const GemmProblem& p, Shape s, const Matrix& packed_a, Matrix& out) {
  const std::int64_t panels = (s.n + kPanelCols - 1) / kPanelCols;
  const std::int64_t macs = packed_a.rows * s.n * s.k;
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min<std::int64_t>(std::thread::hardware_concurrency(), macs / kMinMacsPerThread), 1,
      std::max<std::int64_t>(panels, 1));
  const auto work = [&](std::int64_t first_panel) {
    std::vector<double> panel(static_cast<std::size_t>(kPanelCols * s.k));
    for (std::int64_t q = first_panel; q < panels; q += threads) {
      const std::int64_t first = q * kPanelCols;
      const std::int64_t count = std::min(kPanelCols, s.n - first);
      pack_b_panel(p, s, first, count, panel);
      multiply_panel(packed_a, panel, first, count, out);
    }
  };
  std::vector<std::jthread> helpers;
  for (std::int64_t t = 1; t < threads; ++t) helpers.emplace_back(work, t);
  work(0);
}

void set_mask_bit(std::vector<std::uint8_t>& mask, std::int64_t row_bytes, std::int64_t i,
                  std::int64_t j) {
  mask[static_cast<std::size_t>(i * row_bytes + j / kBitsPerByte)] |=
      static_cast<std::uint8_t>(1u << (j % kBitsPerByte));
}

GemmResult compute(const GemmProblem& p, std::span<const std::int64_t> rows, ColumnSums sums) {
  const Traits t = traits(p.epilogue);
  const Shape s = shape_of(p);
  // NOTE: mask_row_bytes == 0 means "the cuBLASLt default for N columns".
  const std::int64_t row_bytes =
      p.mask_row_bytes > 0 ? p.mask_row_bytes : default_mask_row_bytes(s.n);
  check_problem(p, t, s, row_bytes);
  const Matrix packed_a = pack_a_rows(p, s, rows);

  GemmResult res;
  res.d = Matrix(packed_a.rows, s.n);
  multiply(p, s, packed_a, res.d);
  if (t.aux == AuxRole::PreactOutput) res.preact = Matrix(packed_a.rows, s.n);
  if (t.aux == AuxRole::ReluMaskOutput) {
    res.mask_row_bytes = row_bytes;
    res.relu_mask.assign(static_cast<std::size_t>(packed_a.rows * row_bytes), 0);
  }

  const bool with_c = p.beta != 0.0 && !p.c.empty();
  for (std::int64_t r = 0; r < packed_a.rows; ++r) {
    const std::int64_t i = rows[static_cast<std::size_t>(r)];
    for (std::int64_t j = 0; j < s.n; ++j) {
      double pre = p.scale_ab * p.alpha * res.d(r, j) + (with_c ? p.beta * p.c(i, j) : 0.0);
      if (t.bias == BiasRole::Input) pre += p.bias[static_cast<std::size_t>(j)];
      double d = pre;
      switch (t.activation) {
        case Activation::Identity: break;
        case Activation::Relu: d = relu(pre); break;
        case Activation::Gelu: d = gelu_tanh(pre); break;
        case Activation::ReluGrad:
          d = relu_mask_bit(p.relu_mask_in, row_bytes, i, j) ? pre : 0.0;
          break;
        case Activation::GeluGrad: d = pre * gelu_tanh_grad(p.preact_in(i, j)); break;
      }
      if (t.aux == AuxRole::PreactOutput) res.preact(r, j) = pre;
      if (t.aux == AuxRole::ReluMaskOutput && pre > 0.0)
        set_mask_bit(res.relu_mask, row_bytes, r, j);
      res.d(r, j) = d;
      res.amax = std::max(res.amax, std::abs(d));
    }
  }

  if (p.epilogue == Epilogue::BGradA) {
    for (std::int64_t r = 0; r < packed_a.rows; ++r) {
      const auto row = packed_a.data.begin() + r * s.k;
      res.bias_grad.push_back(std::accumulate(row, row + s.k, 0.0));
    }
  } else if (p.epilogue == Epilogue::BGradB) {
    res.bias_grad.assign(static_cast<std::size_t>(s.n), 0.0);
    for (std::int64_t k = 0; k < s.k; ++k)
      for (std::int64_t j = 0; j < s.n; ++j)
        res.bias_grad[static_cast<std::size_t>(j)] +=
            p.trans_b == Transpose::Yes ? p.b(j, k) : p.b(k, j);
  } else if (t.bias == BiasRole::GradOutput && sums == ColumnSums::Compute) {
    res.bias_grad.assign(static_cast<std::size_t>(s.n), 0.0);
    for (std::int64_t r = 0; r < res.d.rows; ++r)
      for (std::int64_t j = 0; j < s.n; ++j)
        res.bias_grad[static_cast<std::size_t>(j)] += res.d(r, j);
  }
  return res;
}

}  // namespace

GemmResult gemm(const GemmProblem& p) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(shape_of(p).m));
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  return compute(p, rows, ColumnSums::Compute);
}

GemmResult gemm_rows(const GemmProblem& p, std::span<const std::int64_t> rows) {
  return compute(p, rows, ColumnSums::Skip);
}

bool relu_mask_bit(std::span<const std::uint8_t> mask, std::int64_t row_bytes, std::int64_t i,
                   std::int64_t j) {
  const auto byte = mask[static_cast<std::size_t>(i * row_bytes + j / kBitsPerByte)];
  return (byte >> (j % kBitsPerByte)) & 1u;
}

}  // namespace fusekit::reference
