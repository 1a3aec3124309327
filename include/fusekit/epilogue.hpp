#pragma once
// One description of a fused elementwise epilogue, shared by every GEMM backend, the pointwise
// chain kernel and (later) the fusion compiler. It is a chain of nodes applied in order to each
// accumulator x = op(A)·op(B) [i, j] (or to each input element of a pointwise chain); tensors
// the nodes read or write are bound separately (EpilogueTensors), so the description is plain
// data that can be printed, compared and hashed, and a compiled kernel can be keyed by it.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/dtype.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit {

enum class EpilogueOp : std::uint8_t {
  Scale,         // x = p0 · x                                   (alpha)
  AddSource,     // x = x + p0 · C[i,j]                          (beta · C)
  ColumnBias,    // x = x + bias[j]
  RowScale,      // x = x · row_scale[i]
  ColumnScale,   // x = x · col_scale[j]
  Residual,      // x = x + residual[i,j]
  Relu,          // x = max(x, 0)
  GeluTanh,      // x = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
  GeluErf,       // x = ½x(1 + erf(x/√2))
  Silu,          // x = x · sigmoid(x)
  SwiGlu,        // y[i,j] = silu(x[i,gate(j)]) · x[i,up(j)]      (halves the columns; p0 = block)
  GeGlu,         // y[i,j] = gelu_tanh(x[i,gate(j)]) · x[i,up(j)] (halves the columns; p0 = block)
  Clamp,         // x = min(max(x, p0), p1)
  Cast,          // x = round_to(dtype, x)                       (a storage rounding mid-chain)
  QuantizeE4M3,  // amax = max|x|; x = e4m3(x · quant_scale)      (output ready for an fp8 GEMM)
  StoreAux,      // aux[i,j] = x                                 (e.g. the pre-activation)
};

std::string_view epilogue_op_name(EpilogueOp op);

struct EpilogueNode {
  EpilogueOp op = EpilogueOp::Scale;
  float p0 = 0.0f, p1 = 0.0f;  // Scale: alpha; AddSource: beta; Clamp: lo, hi; *Glu: block width
  DType dtype = DType::F32;    // Cast only
  bool operator==(const EpilogueNode&) const = default;
};

// NOTE: gated nodes pair column blocks of width `block`: output column j = k·block + r reads
// gate column 2k·block + r and up column 2k·block + block + r. block = N/2 is plain
// concatenation [W_gate; W_up]; a block equal to half a GEMM tile keeps each pair in one tile.
struct EpilogueSpec {
  std::vector<EpilogueNode> nodes;

  // Builders, so call sites read like the maths: EpilogueSpec{}.bias().gelu_tanh().residual()
  EpilogueSpec& scale(float alpha);
  EpilogueSpec& add_source(float beta);
  EpilogueSpec& bias();
  EpilogueSpec& row_scale();
  EpilogueSpec& column_scale();
  EpilogueSpec& residual();
  EpilogueSpec& relu();
  EpilogueSpec& gelu_tanh();
  EpilogueSpec& gelu_erf();
  EpilogueSpec& silu();
  EpilogueSpec& swiglu(std::int64_t block);
  EpilogueSpec& geglu(std::int64_t block);
  EpilogueSpec& clamp(float lo, float hi);
  EpilogueSpec& cast(DType dtype);
  EpilogueSpec& quantize_e4m3();
  EpilogueSpec& store_aux();

  bool operator==(const EpilogueSpec&) const = default;
  std::string to_string() const;  // "bias → gelu_tanh → residual"
  std::uint64_t hash() const;     // stable across runs and builds (FNV-1a over the nodes)

  bool gated() const;               // has SwiGlu or GeGlu: the output has half the columns
  std::int64_t gate_block() const;  // the gated node's block width (0 if none)
  bool uniform() const;             // every node is position-independent: safe in registers
  bool uses(EpilogueOp op) const;
};

// Tensors the nodes read and write. Unused ones stay empty; validate() says which are needed.
struct EpilogueTensors {
  TensorView source;       // C [M,N]          AddSource
  TensorView bias;         // [N]              ColumnBias
  TensorView row_scale;    // [M] f32          RowScale
  TensorView col_scale;    // [N] f32          ColumnScale
  TensorView residual;     // [M,N_out]        Residual (after a gated node: the halved width)
  TensorView aux;          // [M,N_at_node]    StoreAux
  const float* quant_scale = nullptr;  // QuantizeE4M3: one float in device memory
  float* amax = nullptr;               // QuantizeE4M3: max|x| before the scale (atomic max; NaN if any x is)
};

// Checks the chain (at most one gated node, one quantize which must be last, one aux store,
// block widths dividing N), that every tensor a node needs is present with the right shape
// for an M×N accumulator, and that the aux and amax outputs share no memory with the other
// tensors. Throws fusekit::Error(InvalidArgument) naming what is wrong.
void validate(const EpilogueSpec& spec, const EpilogueTensors& tensors, std::int64_t m, std::int64_t n);

// Checks that an op's output `out_arg` shares no byte with the chain's bias, row and column
// scales, quant_scale, amax and aux store, and that the aux store and the amax share none with
// the op's `operands`: each is read by other tiles while the others are written. (The residual
// and the source may be the output's exact view; the op checks those.)
void validate_disjoint(const EpilogueTensors& tensors, std::string_view out_arg, const TensorView& out,
                       std::initializer_list<check::NamedView> operands);

// Columns of the output after the chain: n, or n/2 after a gated node.
std::int64_t epilogue_output_columns(const EpilogueSpec& spec, std::int64_t n);

}  // namespace fusekit
