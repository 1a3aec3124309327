#pragma once
// The arithmetic of the seeds, as a model: a Ladder is one case (a linear layer, attention) at
// one shape, and each of its rungs is a way to run it, a list of kernels. A kernel states its
// flops (tensor-core and other) and the tensors it reads and writes; from that `analyze` derives
// per kernel and per rung the minimum DRAM bytes (every tensor a kernel touches read or written
// exactly once), the arithmetic intensity, the roofline floor on given Roofs, how many times
// each intermediate crosses HBM, and how many times the output does, counting every tensor of
// the output's shape that the rung produces ("the M×N output crosses HBM five times unfused,
// once fused").
// `explain` prints it as text and `to_json` as JSON. CPU-only; a floor is a lower bound for
// comparing rungs and measurements, not a prediction of a kernel's time.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fusekit/dtype.hpp"
#include "fusekit/model/roofs.hpp"

namespace fusekit::model {

// A named extent of the case: {"M", 4096}.
struct Dim {
  std::string name;
  std::int64_t extent = 0;
};

// A tensor in HBM; its shape names dims of the ladder, outermost first.
struct Tensor {
  std::string name;
  std::vector<std::string> shape;  // {"M", "N"}
  DType dtype = DType::F16;
};

struct Kernel {
  std::string name;
  double tensor_flops = 0;         // matmul flops, on tensor cores at the ladder dtype's rate
  double other_flops = 0;          // everything else, on CUDA cores at the fp32 rate
  std::vector<std::string> reads;  // names of the ladder's tensors
  std::vector<std::string> writes;
};

struct Rung {
  std::string name;  // "unfused", "cublaslt"
  std::vector<Kernel> kernels;
};

struct Ladder {
  std::string name;          // "linear"
  std::string maths;         // "Y = gelu(X·Wᵀ + b)"
  DType dtype = DType::F16;  // of the matmul inputs: picks the tensor-core roof
  std::vector<Dim> dims;
  std::vector<Tensor> tensors;
  std::string output;  // the tensor whose crossings the seeds count
  std::vector<Rung> rungs;

  Ladder& add_rung(std::string rung_name, std::vector<Kernel> kernels);
  // Lookups by name; each throws std::invalid_argument for a name the ladder lacks.
  std::int64_t extent(std::string_view dim) const;
  const Tensor& tensor(std::string_view tensor_name) const;
  const Rung& rung(std::string_view rung_name) const;
  std::int64_t elements(const Tensor& t) const;
  std::int64_t bytes(const Tensor& t) const;
};

// The ladders of the seeds. Every tensor is in `dtype` except attention's log-sum-exp (f32).
// linear: Y[M,N] = gelu(X[M,K]·W[N,K]ᵀ + b[N]); rungs "unfused" (gemm, bias_add, gelu) and
// "cublaslt" (one gemm_gelu_bias kernel).
Ladder linear_ladder(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype);
// residual: Y[M,N] = gelu(X·Wᵀ + b) + R[M,N]; rungs "unfused" (gemm, bias_add, gelu, add),
// "cublaslt" (gemm_gelu_bias, add) and one gemm_gelu_bias_residual kernel per Level-2 backend.
Ladder residual_ladder(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype);

struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t seq_q = 0;
  std::int64_t seq_k = 0;
  std::int64_t head_dim = 0;
};
enum class Mask : std::uint8_t { None, Causal };
// attention: O = softmax(Q·Kᵀ/√D)·V per batch and head; rungs "unfused" (qk → S in `dtype`,
// softmax S → P, pv → O) and "flash" (one kernel writing O and its f32 log-sum-exp).
Ladder attention_ladder(const AttentionShape& shape, Mask mask, DType dtype);

// The memory-bound row ops of bench/norm.hpp, per row of X[M,N]; w and b are [N] in `dtype`, the
// per-row statistics (mean, rstd, max, sum) are f32 [M]. Rung "unfused" is the eager chain of
// fusekit/eager_rows.hpp kernel for kernel, in the bench's order (verify maps the measured
// kernels onto these by position); rung "fused" is the one fused kernel.
//   rmsnorm     row_moments X → rstd; normalize X rstd → T; affine T w → Y
//               fused norm_forward X w → Y rstd
//   layernorm   row_moments X → mean rstd; normalize X mean rstd → T; affine T w b → Y
//               fused norm_forward X w b → Y mean rstd
//   add_rmsnorm add X R → H, then rmsnorm's chain on H
//               fused add_norm_forward X R w → H Y rstd
//   softmax     scale_mask X → S; row_max S → max; row_exp_sum S max → sum;
//               exp_normalize S max sum → Y;  fused softmax_forward X → Y
//   bias_gelu_residual  add_bias X b → T; gelu T → T; add T R → Y;
//               fused pointwise_chain X b R → Y
enum class RowOp : std::uint8_t { RmsNorm, LayerNorm, AddRmsNorm, Softmax, BiasGeluResidual };
inline constexpr RowOp kRowOps[] = {RowOp::RmsNorm, RowOp::LayerNorm, RowOp::AddRmsNorm, RowOp::Softmax,
                                    RowOp::BiasGeluResidual};
std::string_view row_op_name(RowOp op);   // "rmsnorm", "layernorm", "add_rmsnorm", "softmax", …
std::string_view row_op_maths(RowOp op);  // "Y = X·rstd·w, rstd = 1/√(mean(X²) + ε)"
// Throws std::invalid_argument for rows or cols ≤ 0 or a dtype other than f32, f16 or bf16.
Ladder row_ladder(RowOp op, std::int64_t rows, std::int64_t cols, DType dtype);

// Who a tensor is to a rung: never written (input), written and never read again (output), or
// written and read back (intermediate: with fusion it would stay on chip).
enum class Role : std::uint8_t { Input, Output, Intermediate };
enum class Limiter : std::uint8_t { Memory, Matrix, Fp32 };  // the roof a floor sits under

struct Traffic {
  double tensor_flops = 0;
  double other_flops = 0;
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;

  double flops() const { return tensor_flops + other_flops; }
  std::int64_t bytes() const { return bytes_read + bytes_written; }
  double intensity() const;  // flops per byte; 0 for a kernel that moves nothing
};

struct Floor {
  double memory_s = 0;  // bytes / DRAM bandwidth
  double matrix_s = 0;  // tensor flops / matrix rate of the dtype
  double fp32_s = 0;    // other flops / fp32 rate
  double seconds = 0;   // the largest of the three
  Limiter limiter = Limiter::Memory;
};

// NOTE: the three units can overlap (FlashAttention-3 runs softmax under the next GEMM), so the
// floor of one kernel is the largest of the three times, not their sum.
Floor roofline_floor(const Traffic& traffic, DType matrix_dtype, const Roofs& roofs);

struct TensorAccess {
  std::string tensor;
  std::int64_t bytes = 0;
  Role role = Role::Input;
};

struct KernelReport {
  std::string name;
  std::vector<TensorAccess> reads;
  std::vector<TensorAccess> writes;
  Traffic traffic;
  Floor floor;
};

struct Crossings {
  std::string tensor;
  std::int64_t bytes = 0;  // of one crossing
  int writes = 0;
  int reads = 0;
  int count() const { return writes + reads; }
};

struct RungReport {
  std::string name;
  std::vector<KernelReport> kernels;
  Traffic traffic;     // summed over kernels
  double floor_s = 0;  // summed over kernels: they run one after another
  std::vector<Crossings> intermediates;
  int output_crossings = 0;  // writes + reads of produced tensors shaped like the output
  std::int64_t intermediate_bytes() const;  // Σ crossings × bytes over intermediates
};

RungReport analyze(const Ladder& ladder, const Rung& rung, const Roofs& roofs);
std::vector<RungReport> analyze(const Ladder& ladder, const Roofs& roofs);

// The numbers the seeds state, computed from the ladders above (see "The arithmetic").
struct SeedNumbers {
  std::int64_t epilogue_bytes = 0;   // bias_add + gelu of linear 4096³ f16 unfused: "~130 MB"
  double epilogue_flops = 0;         // the flops they buy: "34 million"
  int output_crossings_unfused = 0;  // "crosses HBM five times"
  int output_crossings_fused = 0;    // "Fused, it crosses once"
  std::int64_t scores_per_head = 0;  // at sequence length 8192: "64 million values"
};
SeedNumbers seed_numbers();

// Per rung and kernel: flops, bytes, intensity, floor and crossings, then conclusions comparing
// every rung with the first one.
std::string explain(const Ladder& ladder, const Roofs& roofs);
nlohmann::json to_json(const Ladder& ladder, const Roofs& roofs);

}  // namespace fusekit::model
