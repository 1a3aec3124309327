// fused_gemm's backend choice, without a device: which gate blocks the portable kernel takes, and
// which operands it refuses (plan_fused_gemm reads no memory, so fake aligned addresses suffice).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "fusekit/error.hpp"
#include "fusekit/fused_gemm.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;

constexpr std::int64_t kM = 64, kK = 32, kN = 1536;  // 2·block divides N for every block below

// Fake operands laid out one after another, each from a fresh slot past the last one's bytes:
// the plan checks that no output overlaps another argument, but reads no memory.
class FakeMemory {
 public:
  TensorView matrix(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    return take(TensorView::matrix(testing::fake_address(slot_), dtype, rows, cols, ld));
  }
  TensorView vector(DType dtype, std::int64_t n) {
    return take(TensorView::contiguous(testing::fake_address(slot_), dtype, {n}));
  }
  const float* scalar() { return static_cast<const float*>(vector(DType::F32, 1).data); }

 private:
  TensorView take(const TensorView& t) {
    slot_ += (t.span_bytes() + testing::kFakeSlotBytes - 1) / testing::kFakeSlotBytes;
    return t;
  }
  std::size_t slot_ = 0;
};

FusedGemmArgs gated_args(std::int64_t block) {
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, kM, kK, kK);
  g.b = mem.matrix(DType::BF16, kN, kK, kK);
  g.d = mem.matrix(DType::BF16, kM, kN / 2, kN / 2);
  g.epilogue = EpilogueSpec{}.swiglu(block);
  return g;
}

// The portable kernel pairs inside half its 128-column tile (blocks dividing 64) or loads a
// tile's gate and up rows a block apart (blocks that are multiples of 64, the Hopper kernel's
// 128 among them), so one weight layout serves every backend.
TEST(FusedGemmPlan, PortableTakesGateBlocksDividingOrMultiplesOfHalfItsTile) {
  const std::int64_t blocks[] = {8, 32, 64, kSm90GateBlock, 256};
  for (const std::int64_t block : blocks)
    EXPECT_EQ(plan_fused_gemm(gated_args(block), GemmBackend::Portable).backend, GemmBackend::Portable) << block;
  expect_error([&] { plan_fused_gemm(gated_args(96), GemmBackend::Portable); }, "multiple of 64",
               ErrorKind::Unsupported);
}

// The portable kernel addresses A and B with 32-bit element offsets: an operand of 2^31 elements
// or more is refused before any launch, with the reason.
TEST(FusedGemmPlan, PortableRefusesOperandsPast32BitOffsets) {
  constexpr std::int64_t kRows = std::int64_t{1} << 20, kWide = 4096;  // 2^32 elements
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, kRows, kWide, kWide);
  g.b = mem.matrix(DType::BF16, kM, kWide, kWide);
  g.d = mem.matrix(DType::BF16, kRows, kM, kM);
  expect_error([&] { plan_fused_gemm(g, GemmBackend::Portable); }, "32-bit element offsets", ErrorKind::Unsupported);
  g.a = mem.matrix(DType::BF16, kM, kWide, kWide);  // the same call, small A
  g.d = mem.matrix(DType::BF16, kM, kM, kM);
  EXPECT_EQ(plan_fused_gemm(g, GemmBackend::Portable).backend, GemmBackend::Portable);
}

// The portable epilogue reads the bias 16 bytes at a time: a bias that does not start on a
// 16-byte boundary is refused before any launch, naming it.
TEST(FusedGemmPlan, PortableRefusesAMisalignedBias) {
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, kM, kK, kK);
  g.b = mem.matrix(DType::BF16, kN, kK, kK);
  g.d = mem.matrix(DType::BF16, kM, kN, kN);
  g.epilogue = EpilogueSpec{}.bias().gelu_tanh();
  g.tensors.bias = mem.vector(DType::BF16, kN);
  void* const aligned = g.tensors.bias.data;
  constexpr std::size_t kOneElement = 2;  // bytes of a bf16
  g.tensors.bias.data = static_cast<char*>(aligned) + kOneElement;
  expect_error([&] { plan_fused_gemm(g, GemmBackend::Portable); }, "bias is not", ErrorKind::Unsupported);
  g.tensors.bias.data = aligned;
  EXPECT_EQ(plan_fused_gemm(g, GemmBackend::Portable).backend, GemmBackend::Portable);
}

// The Hopper kernel takes its extents as 32-bit integers: M of 2^31 rows is refused, naming why
// (before the question of the GPU, so without one too).
TEST(FusedGemmPlan, Sm90RefusesExtentsPast32Bits) {
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, std::int64_t{1} << 31, kK, kK);
  g.b = mem.matrix(DType::BF16, kN, kK, kK);
  g.d = mem.matrix(DType::BF16, std::int64_t{1} << 31, kN, kN);
  expect_error([&] { plan_fused_gemm(g, GemmBackend::Sm90); }, "M, N and K as 32-bit integers", ErrorKind::Unsupported);
}

// Which chains the Hopper kernel has is a property of the request, told before the question of
// the GPU: a chain of the scale-bias-activation form is taken (refused here, if at all, for the
// device), other chains are refused for the chain, and that form on the Pingpong schedule for it.
TEST(FusedGemmPlan, Sm90TakesTheScaleBiasActivationFormOnItsSchedule) {
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, kM, kK, kK);
  g.b = mem.matrix(DType::BF16, kN, kK, kK);
  g.d = mem.matrix(DType::BF16, kM, kN, kN);
  g.tensors.bias = mem.vector(DType::BF16, kN);
  g.tensors.residual = g.d;
  const auto refusal = [&](const EpilogueSpec& spec, Sm90Schedule schedule) -> std::string {
    g.epilogue = spec;
    g.schedule = schedule;
    try {
      EXPECT_EQ(plan_fused_gemm(g, GemmBackend::Sm90).backend, GemmBackend::Sm90);
      return "";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
      return e.what();
    }
  };
  constexpr auto npos = std::string::npos;
  for (const auto& spec : {EpilogueSpec{}.bias().silu(), EpilogueSpec{}.bias().residual()}) {
    const std::string why = refusal(spec, Sm90Schedule::Auto);
    EXPECT_TRUE(why.empty() || why.find("needs an sm_90 GPU") != npos) << spec.to_string() << ": " << why;
    EXPECT_NE(refusal(spec, Sm90Schedule::Pingpong).find("Cooperative schedule only"), npos) << spec.to_string();
  }
  EXPECT_NE(refusal(EpilogueSpec{}.silu().bias(), Sm90Schedule::Auto).find("no Hopper kernel is compiled"), npos);
}

// The GELU pre-activation store is cuBLASLt's GELU_AUX_BIAS, which takes aux rows of a multiple
// of 8 elements: other rows are refused for it, naming why.
TEST(FusedGemmPlan, CublasLtStoresTheGeluPreactivationInRowsOfEightElements) {
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, kM, kK, kK);
  g.b = mem.matrix(DType::BF16, kN, kK, kK);
  g.d = mem.matrix(DType::BF16, kM, kN, kN);
  g.epilogue = EpilogueSpec{}.bias().store_aux().gelu_tanh();
  g.tensors.bias = mem.vector(DType::BF16, kN);
  g.tensors.aux = mem.matrix(DType::BF16, kM, kN, kN + 8);
  EXPECT_EQ(plan_fused_gemm(g, GemmBackend::CublasLt).backend, GemmBackend::CublasLt);
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::CublasLt);
  g.tensors.aux = mem.matrix(DType::BF16, kM, kN, kN + 4);
  expect_error([&] { plan_fused_gemm(g, GemmBackend::CublasLt); }, "aux rows of a multiple of 8 elements",
               ErrorKind::Unsupported);
}

// A chain ending in quantize_e4m3 stores D in e4m3, 8 outputs (8 bytes) at a time: rows of any
// multiple of 8 bytes are taken, others refused with the reason.
TEST(FusedGemmPlan, PortableTakesAnE4m3OutputInRowsOfEightBytes) {
  constexpr std::int64_t kCols = 131;
  FakeMemory mem;
  FusedGemmArgs g;
  g.a = mem.matrix(DType::BF16, kM, kK, kK);
  g.b = mem.matrix(DType::BF16, kCols, kK, kK);
  g.d = mem.matrix(DType::E4M3, kM, kCols, 136);
  g.epilogue = EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3();
  g.tensors.bias = mem.vector(DType::BF16, kCols);
  g.tensors.quant_scale = mem.scalar();
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::Portable);
  g.d = mem.matrix(DType::E4M3, kM, kCols, 132);
  expect_error([&] { plan_fused_gemm(g); }, "D's rows aligned to 8 bytes", ErrorKind::Unsupported);
}

}  // namespace
}  // namespace fusekit
