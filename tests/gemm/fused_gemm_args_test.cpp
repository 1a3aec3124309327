// Argument validation of fused_gemm, which runs before any device access: each bad argument is
// rejected with an InvalidArgument error that names it. No GPU needed (the addresses are never
// dereferenced, and the handle creates nothing before the checks pass).
#include <gtest/gtest.h>

#include <cstdint>

#include "fusekit/error.hpp"
#include "fusekit/fused_gemm.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

constexpr std::int64_t kM = 64, kN = 32, kK = 16;

enum Slot : std::size_t { kSlotA, kSlotB, kSlotD, kSlotBias, kSlotAux, kSlotScale, kSlotAmax };

FusedGemmArgs valid(const EpilogueSpec& chain) {
  FusedGemmArgs g;
  g.a = TensorView::matrix(fake_address(kSlotA), DType::BF16, kM, kK, kK);
  g.b = TensorView::matrix(fake_address(kSlotB), DType::BF16, kN, kK, kK);
  g.d = TensorView::matrix(fake_address(kSlotD), DType::BF16, kM, kN, kN);
  g.epilogue = chain;
  g.tensors.bias = TensorView::contiguous(fake_address(kSlotBias), DType::BF16, {kN});
  return g;
}

void run(const FusedGemmArgs& g) {
  FusedGemmHandle handle;
  fused_gemm(handle, g);
}

// d, the aux store and the amax share no byte with any argument they are not documented to
// alias (d may be the residual's or the source's exact view).
TEST(FusedGemmArgs, RejectsOutputsOverlappingAnyOtherArgument) {
  auto g = valid(EpilogueSpec{}.bias().gelu_tanh());
  g.tensors.bias.data = fake_address(kSlotD, 2 * kN);  // d's second row
  expect_error([&] { run(g); }, "d: expected memory disjoint from epilogue bias");

  g = valid(EpilogueSpec{}.bias().store_aux().gelu_tanh());
  g.tensors.aux = TensorView::matrix(fake_address(kSlotB), DType::BF16, kM, kN, kN);
  expect_error([&] { run(g); }, "epilogue aux: expected memory disjoint from b");
  g.tensors.aux = TensorView::matrix(fake_address(kSlotAux), DType::BF16, kM, kN, kN);
  testing::expect_device_check([&] { run(g); }, "a");  // every check without a device passed

  g = valid(EpilogueSpec{}.bias().quantize_e4m3());
  g.d.dtype = DType::E4M3;
  g.tensors.quant_scale = static_cast<const float*>(fake_address(kSlotScale));
  g.tensors.amax = static_cast<float*>(fake_address(kSlotA, 8));
  expect_error([&] { run(g); }, "epilogue amax: expected memory disjoint from a");
  g.tensors.amax = static_cast<float*>(fake_address(kSlotD, 4));
  expect_error([&] { run(g); }, "d: expected memory disjoint from epilogue amax");
  g.tensors.amax = static_cast<float*>(fake_address(kSlotAmax));
  g.tensors.quant_scale = static_cast<const float*>(fake_address(kSlotD, 8));
  expect_error([&] { run(g); }, "d: expected memory disjoint from epilogue quant_scale");
}

// The chain is checked before d's shape, which follows from it: a bad gate block is named as such.
TEST(FusedGemmArgs, NamesABadGateBlockBeforeTheOutputShape) {
  auto g = valid(EpilogueSpec{}.swiglu(3));  // 2·3 does not divide N = 32
  g.tensors.bias = {};
  g.d = TensorView::matrix(fake_address(kSlotD), DType::BF16, kM, kN / 2, kN / 2);
  expect_error([&] { run(g); }, "epilogue node 0 (swiglu) block");
}

}  // namespace
}  // namespace fusekit
