// Argument validation of attention_forward, which runs before any device access: each bad argument
// is rejected naming it (InvalidArgument), an unimplemented head dim is Unsupported. No GPU needed
// (the pointers are never dereferenced).
#include <gtest/gtest.h>

#include <string>

#include "fusekit/attention.hpp"
#include "fusekit/error.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;

constexpr std::int64_t kB = 2, kS = 100, kSk = 120, kHq = 8, kHkv = 2, kD = 128;

using testing::fake_address;

// q, k, v, o and lse at distinct addresses (o may be q's view, but not overlap k, v or lse).
enum Slot : std::size_t { kSlotQ, kSlotK, kSlotV, kSlotO, kSlotLse };

AttentionForwardArgs valid() {
  AttentionForwardArgs a;
  a.q = TensorView::contiguous(fake_address(kSlotQ), DType::BF16, {kB, kS, kHq, kD});
  a.o = TensorView::contiguous(fake_address(kSlotO), DType::BF16, {kB, kS, kHq, kD});
  a.k = TensorView::contiguous(fake_address(kSlotK), DType::BF16, {kB, kSk, kHkv, kD});
  a.v = TensorView::contiguous(fake_address(kSlotV), DType::BF16, {kB, kSk, kHkv, kD});
  a.lse = TensorView::contiguous(fake_address(kSlotLse), DType::F32, {kB, kHq, kS});
  return a;
}

TEST(AttentionArgs, RejectsEachBadArgumentByName) {
  auto a = valid();
  a.q.dtype = a.o.dtype = DType::F32;
  expect_error([&] { attention_forward(a); }, "q dtype");
  a = valid();
  a.k.dtype = DType::F16;
  expect_error([&] { attention_forward(a); }, "k dtype");
  a = valid();
  a.o.dtype = DType::F16;
  expect_error([&] { attention_forward(a); }, "o dtype");
  a = valid();
  a.q = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kS, kHq, kD});
  expect_error([&] { attention_forward(a); }, "q rank");
  a = valid();
  a.k = a.v = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB, kSk, 3, kD});
  expect_error([&] { attention_forward(a); }, "k heads");
  a = valid();
  a.v = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB, kSk + 1, kHkv, kD});
  expect_error([&] { attention_forward(a); }, "v shape");
  a = valid();
  a.o = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB, kS, kHq, 64});
  expect_error([&] { attention_forward(a); }, "o shape");
  a = valid();
  a.k = a.v = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB + 1, kSk, kHkv, kD});
  expect_error([&] { attention_forward(a); }, "k batch");
  a = valid();
  a.k = a.v = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB, kSk, kHkv, 64});
  expect_error([&] { attention_forward(a); }, "k head_dim");
  a = valid();
  a.q.strides[3] = 2;
  expect_error([&] { attention_forward(a); }, "q innermost stride");
  a = valid();
  a.q.strides[2] = kD + 1;
  expect_error([&] { attention_forward(a); }, "q stride[2]");
  a = valid();
  a.o.strides[1] = 0;  // every token of a sequence on one row: CTAs would race
  expect_error([&] { attention_forward(a); }, "o stride[1]");
  a = valid();
  a.lse = TensorView::contiguous(testing::fake_pointer(), DType::F32, {kB, kS, kHq});
  expect_error([&] { attention_forward(a); }, "lse shape");
  a = valid();
  a.lse.dtype = DType::BF16;
  expect_error([&] { attention_forward(a); }, "lse dtype");
  a = valid();
  a.scale = 0.0f;
  expect_error([&] { attention_forward(a); }, "scale");
  a = valid();
  a.softcap = -1.0f;
  expect_error([&] { attention_forward(a); }, "softcap");
  a = valid();
  a.window.left = -2;
  expect_error([&] { attention_forward(a); }, "window.left");
  a = valid();
  a.sm_margin = -1;
  expect_error([&] { attention_forward(a); }, "sm_margin");
  a = valid();
  a.varlen = VarlenBatch{nullptr, nullptr, 2, kS};
  expect_error([&] { attention_forward(a); }, "q rank");
}

TEST(AttentionArgs, RejectsBadVarlenArguments) {
  void* p = testing::fake_pointer();
  const auto* offsets = static_cast<const std::int32_t*>(p);
  AttentionForwardArgs a;
  a.q = a.o = TensorView::contiguous(p, DType::F16, {300, kHq, kD});
  a.k = a.v = TensorView::contiguous(p, DType::F16, {400, kHkv, kD});
  a.varlen = VarlenBatch{nullptr, offsets, 3, 200};
  expect_error([&] { attention_forward(a); }, "varlen.cu_seqlens_q");
  a.varlen = VarlenBatch{offsets, offsets, 3, 301};
  expect_error([&] { attention_forward(a); }, "varlen.max_seqlen_q");
  a.varlen = VarlenBatch{offsets, offsets, 3, 200};
  a.lse = TensorView::contiguous(p, DType::F32, {kHq, 299});
  expect_error([&] { attention_forward(a); }, "lse shape");
}

TEST(AttentionArgs, RejectsOutputsOverlappingWhatOtherTilesRead) {
  auto a = valid();
  a.o.data = a.k.data;
  expect_error([&] { attention_forward(a); }, "o: expected memory disjoint from k");
  a = valid();
  a.o.data = fake_address(kSlotV, 64);
  expect_error([&] { attention_forward(a); }, "o: expected memory disjoint from v");
  a = valid();
  a.o.data = fake_address(kSlotQ, 256);  // a query tile shifted: in place only through q's own view
  expect_error([&] { attention_forward(a); }, "o: expected memory disjoint from q, or q's exact view");
  a = valid();
  a.lse.data = fake_address(kSlotO, 1024);
  expect_error([&] { attention_forward(a); }, "lse: expected memory disjoint from o");
  a = valid();
  a.lse.data = fake_address(kSlotQ, 4096);
  expect_error([&] { attention_forward(a); }, "lse: expected memory disjoint from q");
  a = valid();
  a.o = a.q;  // in place: passes every check that needs no device
  EXPECT_NO_THROW(plan_attention_forward(a));
}

// The sequence offsets are read by every CTA: no output may lie over them.
TEST(AttentionArgs, RejectsOutputsOverlappingTheSequenceOffsets) {
  AttentionForwardArgs a;
  a.q = TensorView::contiguous(fake_address(kSlotQ), DType::F16, {300, kHq, kD});
  a.o = TensorView::contiguous(fake_address(kSlotO), DType::F16, {300, kHq, kD});
  a.k = TensorView::contiguous(fake_address(kSlotK), DType::F16, {400, kHkv, kD});
  a.v = TensorView::contiguous(fake_address(kSlotV), DType::F16, {400, kHkv, kD});
  const auto* offsets = static_cast<const std::int32_t*>(fake_address(kSlotLse + 1));
  a.varlen = VarlenBatch{offsets, static_cast<const std::int32_t*>(fake_address(kSlotO, 64)), 3, 200};
  expect_error([&] { attention_forward(a); }, "o: expected memory disjoint from varlen.cu_seqlens_k");
  a.varlen = VarlenBatch{offsets, offsets, 3, 200};
  a.lse = TensorView::contiguous(fake_address(kSlotLse + 1, 8), DType::F32, {kHq, 300});
  expect_error([&] { attention_forward(a); }, "lse: expected memory disjoint from varlen.cu_seqlens_q");
  a.lse.data = fake_address(kSlotLse);
  EXPECT_NO_THROW(plan_attention_forward(a));
}

TEST(AttentionArgs, RejectsCuSeqlensBetweenIntegers) {
  const auto* offsets = static_cast<const std::int32_t*>(fake_address(kSlotLse));
  const auto* misaligned = static_cast<const std::int32_t*>(fake_address(kSlotLse, 2));
  AttentionForwardArgs a;
  a.q = TensorView::contiguous(fake_address(kSlotQ), DType::F16, {300, kHq, kD});
  a.o = TensorView::contiguous(fake_address(kSlotO), DType::F16, {300, kHq, kD});
  a.k = TensorView::contiguous(fake_address(kSlotK), DType::F16, {400, kHkv, kD});
  a.v = TensorView::contiguous(fake_address(kSlotV), DType::F16, {400, kHkv, kD});
  a.varlen = VarlenBatch{offsets, misaligned, 3, 200};
  expect_error([&] { attention_forward(a); }, "varlen.cu_seqlens_k address: expected a multiple of 4 bytes");
  a.varlen = VarlenBatch{misaligned, offsets, 3, 200};
  expect_error([&] { attention_forward(a); }, "varlen.cu_seqlens_q address");
  a.varlen = VarlenBatch{offsets, nullptr, 3, 200};
  expect_error([&] { attention_forward(a); }, "varlen.cu_seqlens_k: expected a device pointer");
}

TEST(AttentionArgs, AcceptsBhsdStridesBeforeTheDeviceChecks) {
  auto a = valid();
  // [B, S, H, D] views of [B, H, S, D] storage: only the device check (fake pointer) may fail.
  a.q.strides = a.o.strides = {kHq * kS * kD, kD, kS * kD, 1};
  a.k.strides = a.v.strides = {kHkv * kSk * kD, kD, kSk * kD, 1};
  try {
    attention_forward(a);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pointer"), std::string::npos) << e.what();
  }
}

TEST(AttentionArgs, HeadDimWithoutKernelIsUnsupported) {
  auto a = valid();
  for (const std::int64_t d : {32, 96, 512}) {
    a.q = a.o = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB, kS, kHq, d});
    a.k = a.v = TensorView::contiguous(testing::fake_pointer(), DType::BF16, {kB, kSk, kHkv, d});
    a.lse = {};
    expect_error([&] { attention_forward(a); }, "head_dim", ErrorKind::Unsupported);
  }
}

// A request for the Hopper kernel outside what it covers is Unsupported, naming the reason,
// before any device access; an unknown backend is an invalid argument.
TEST(AttentionArgs, Sm90RequestOutsideItsCoverageIsUnsupported) {
  const auto* offsets = static_cast<const std::int32_t*>(fake_address(kSlotLse));
  AttentionForwardArgs a;
  a.q = a.o = TensorView::contiguous(fake_address(kSlotQ), DType::F16, {300, kHq, kD});
  a.k = TensorView::contiguous(fake_address(kSlotK), DType::F16, {400, kHkv, kD});
  a.v = TensorView::contiguous(fake_address(kSlotV), DType::F16, {400, kHkv, kD});
  a.varlen = VarlenBatch{offsets, offsets, 3, 200};
  a.backend = AttentionBackend::Sm90;
  expect_error([&] { plan_attention_forward(a); }, "variable lengths", ErrorKind::Unsupported);
  a = valid();
  a.backend = AttentionBackend::Sm90;
  a.k.strides[1] = -kHkv * kD;  // keys stored last to first: TMA strides are positive
  a.v.strides[1] = -kHkv * kD;
  expect_error([&] { plan_attention_forward(a); }, "k stride[1]", ErrorKind::Unsupported);
  a = valid();
  a.backend = AttentionBackend::Portable;
  const AttentionReport report = plan_attention_forward(a);
  EXPECT_EQ(report.backend, AttentionBackend::Portable);
  EXPECT_EQ(report.reason, "requested");
  a.backend = static_cast<AttentionBackend>(7);
  expect_error([&] { plan_attention_forward(a); }, "backend");
}

// The portable kernel's grid is not persistent: a margin of SMs asked of it by name is refused
// before any device access. Auto takes one on every GPU (the Hopper kernel's, where it runs).
TEST(AttentionArgs, SmMarginIsRefusedForThePortableKernel) {
  auto a = valid();
  a.backend = AttentionBackend::Portable;
  a.sm_margin = 1;
  expect_error([&] { plan_attention_forward(a); }, "sm_margin: expected 0 with backend Portable");
  expect_error([&] { attention_forward(a); }, "sm_margin: expected 0 with backend Portable");
  a.backend = AttentionBackend::Auto;
  EXPECT_NO_THROW(plan_attention_forward(a));
}

}  // namespace
}  // namespace fusekit
