// Argument validation of fused_gemm, which runs before any device access: each bad argument is
// rejected with an InvalidArgument error that names it. No GPU needed (the addresses are never
// dereferenced, and the handle creates nothing before the checks pass).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

// fused_gemm's argument checks, which run before any device access: each bad argument named, and
// by plan_fused_gemm alike (it runs the same checks).
TEST(FusedGemmArgs, RejectsEachBadArgumentByName) {
  FusedGemmHandle handle;
  const auto rejected = [&](const FusedGemmArgs& g, const std::string& why) {
    expect_error([&] { fused_gemm(handle, g); }, why);
    expect_error([&] { plan_fused_gemm(g); }, why);
  };
  const auto plain = [] {
    FusedGemmArgs g;
    g.a = TensorView::matrix(fake_address(kSlotA), DType::BF16, kM, kK, kK);
    g.b = TensorView::matrix(fake_address(kSlotB), DType::BF16, kN, kK, kK);
    g.d = TensorView::matrix(fake_address(kSlotD), DType::BF16, kM, kN, kN);
    return g;
  };
  auto g = plain();
  g.epilogue = EpilogueSpec{}.quantize_e4m3();
  g.tensors.quant_scale = static_cast<const float*>(fake_address(kSlotScale));
  rejected(g, "d dtype: expected e4m3, got bf16");
  g.d.dtype = DType::E4M3;
  g.tensors.quant_scale = static_cast<const float*>(fake_address(kSlotScale, 2));
  rejected(g, "epilogue quant_scale address: expected a multiple of 4 bytes");
  g = plain();
  g.d.dtype = DType::E4M3;
  rejected(g, "d dtype: expected bf16, got e4m3");
  g = plain();
  g.epilogue = EpilogueSpec{}.bias();
  g.tensors.bias = TensorView::contiguous(fake_address(kSlotBias), DType::F16, {kN});
  rejected(g, "epilogue bias dtype: expected bf16");
  g = plain();
  g.d.data = fake_address(kSlotA, kK * 2);  // D from A's second row on
  rejected(g, "d: expected memory disjoint from a");
  g = plain();
  g.schedule = static_cast<Sm90Schedule>(4);
  rejected(g, "schedule: expected Auto, Cooperative, Pingpong or Deferred, got 4");
  g = plain();
  g.epilogue.nodes.push_back({static_cast<EpilogueOp>(99)});
  rejected(g, "epilogue node 0 op: expected an EpilogueOp, got 99");
  g = plain();
  expect_error([&] { plan_fused_gemm(g, static_cast<GemmBackend>(4)); }, "backend: expected Auto, CublasLt");
  g = plain();
  g.epilogue = EpilogueSpec{}.residual();
  g.tensors.residual = TensorView::matrix(fake_address(kSlotD, 2), DType::BF16, kM, kN, kN);
  rejected(g, "d: expected memory disjoint from epilogue residual, or");
}

}  // namespace
}  // namespace fusekit
