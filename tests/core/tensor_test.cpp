#include "fusekit/tensor.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fusekit/dtype.hpp"
#include "fusekit/error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::fake_pointer;

TEST(TensorView, ContiguousStridesAreRowMajor) {
  auto t = TensorView::contiguous(fake_pointer(), DType::BF16, {2, 3, 5});
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.strides[0], 15);
  EXPECT_EQ(t.strides[1], 5);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.span_bytes(), 60u);
}

TEST(TensorView, MatrixWithPaddedRowsIsNotContiguous) {
  auto t = TensorView::matrix(fake_pointer(), DType::F32, 4, 6, 8);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.span_bytes(), (3 * 8 + 6) * 4u);
  EXPECT_EQ(t.describe(), "f32[4, 6] strides [8, 1]");
}

TEST(TensorChecks, ErrorsNameArgumentExpectedAndActual) {
  auto t = TensorView::matrix(fake_pointer(), DType::F16, 4, 6, 6);
  try {
    check::dtype("weight", t, {DType::BF16, DType::F32});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("weight dtype"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf16 or f32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("got f16"), std::string::npos) << msg;
  }
  try {
    check::shape("x", t, {4, 7});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("x shape: expected [4, 7], got [4, 6]"), std::string::npos) << msg;
  }
}

TEST(TensorChecks, RejectsNullOverlapAndMisalignment) {
  EXPECT_THROW(check::not_null("x", TensorView::matrix(nullptr, DType::F32, 2, 2, 2)), Error);
  EXPECT_THROW(check::inner_contiguous("x", TensorView::matrix(fake_pointer(), DType::F32, 2, 4, 3)), Error);
  auto strided_inner = TensorView::matrix(fake_pointer(), DType::F32, 2, 4, 8);
  strided_inner.strides[1] = 2;
  EXPECT_THROW(check::inner_contiguous("x", strided_inner), Error);
  auto odd = TensorView::matrix(static_cast<char*>(fake_pointer()) + 2, DType::BF16, 2, 8, 8);
  EXPECT_THROW(check::aligned("x", odd, 16), Error);
  EXPECT_NO_THROW(check::aligned("x", TensorView::matrix(fake_pointer(), DType::BF16, 2, 8, 8), 16));
  EXPECT_THROW(check::aligned("x", TensorView::matrix(fake_pointer(), DType::BF16, 2, 8, 9), 16), Error);
}

TEST(TensorChecks, RejectsAnAddressBetweenElements) {
  char* const base = static_cast<char*>(fake_pointer());
  try {
    check::structure("mean", TensorView::contiguous(base + 2, DType::F32, {4}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mean address: expected a multiple of 4 bytes (the size of f32)"), std::string::npos) << msg;
  }
  EXPECT_THROW(check::structure("x", TensorView::contiguous(base + 1, DType::BF16, {4})), Error);
  EXPECT_NO_THROW(check::structure("x", TensorView::contiguous(base + 2, DType::BF16, {4})));
  EXPECT_NO_THROW(check::structure("q", TensorView::contiguous(base + 1, DType::E4M3, {4})));
}

TEST(TensorChecks, RejectsAnUnknownDtypeByName) {
  auto t = TensorView::contiguous(fake_pointer(), DType::F32, {4});
  t.dtype = static_cast<DType>(77);
  try {
    check::structure("x", t);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x dtype: expected a DType, got 77"), std::string::npos) << e.what();
  }
}

// Views overlap by the bytes they reach: identical views pass where in place is allowed (a
// dimension of extent 1 whatever its stride), shifted ones never, empty ones always.
TEST(TensorChecks, DisjointAllowsOnlyIdenticalViewsInPlace) {
  using check::InPlace;
  char* const base = static_cast<char*>(fake_pointer());
  const auto x = TensorView::matrix(base, DType::BF16, 1, 4, 4);
  auto x_ld = TensorView::matrix(base, DType::BF16, 1, 4, 8);  // one row: its stride moves nothing
  EXPECT_NO_THROW(check::disjoint("y", x_ld, "x", x, InPlace::Allowed));
  EXPECT_THROW(check::disjoint("y", x_ld, "x", x, InPlace::Forbidden), Error);
  EXPECT_THROW(check::disjoint("y", TensorView::matrix(base + 2, DType::BF16, 1, 4, 4), "x", x, InPlace::Allowed), Error);
  EXPECT_NO_THROW(check::disjoint("y", TensorView::matrix(base + 8, DType::BF16, 1, 4, 4), "x", x, InPlace::Forbidden));
  EXPECT_NO_THROW(check::disjoint("y", TensorView::matrix(base, DType::BF16, 0, 4, 4), "x", x, InPlace::Forbidden));
  auto reversed = TensorView::matrix(base + 8, DType::BF16, 2, 4, -4);  // rows at base + 8 and base
  EXPECT_THROW(check::disjoint("y", reversed, "x", x, InPlace::Forbidden), Error);
}

// An output checked against several arguments: the first it overlaps is named.
TEST(TensorChecks, DisjointFromEachNamesTheOverlappedArgument) {
  using testing::fake_address;
  const auto y = TensorView::contiguous(fake_address(0), DType::F32, {4, 4});
  const auto apart = TensorView::contiguous(fake_address(1), DType::F32, {4});
  const auto inside = TensorView::contiguous(fake_address(0, 60), DType::F32, {1});  // y's last element
  const TensorView none;
  EXPECT_NO_THROW(check::disjoint_from_each("y", y, {{"bias", &apart}, {"scale", &none}}));
  try {
    check::disjoint_from_each("y", y, {{"bias", &apart}, {"scale", &inside}});
    FAIL() << "expected an overlap error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("y: expected memory disjoint from scale"), std::string::npos) << e.what();
  }
  // A raw scale pointer is one f32 there, a null one nothing.
  float value = 0;
  const TensorView scalar = check::scalar_view(&value);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.span_bytes(), sizeof(float));
  EXPECT_TRUE(check::scalar_view(nullptr).empty());
}

// A view whose last element lies past 2^63 bytes from its first has no span to compare or index.
TEST(TensorChecks, RejectsAViewWhoseSpanOverflows) {
  constexpr std::int64_t kHuge = std::int64_t{1} << 40;
  const auto ok = TensorView::matrix(fake_pointer(), DType::BF16, 4, 8, kHuge);
  EXPECT_NO_THROW(check::structure("x", ok));
  const auto huge = TensorView::matrix(fake_pointer(), DType::BF16, kHuge, 8, kHuge);
  try {
    check::structure("x", huge);
    FAIL() << "expected a span error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x span: expected at most 2^63 - 1 bytes"), std::string::npos) << e.what();
  }
}

TEST(DType, ParseAcceptsAliasesAndNamesBadInput) {
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("fp16"), DType::F16);
  EXPECT_EQ(parse_dtype("fp8"), DType::E4M3);
  EXPECT_EQ(dtype_size(DType::E5M2), 1u);
  try {
    parse_dtype("int4", "--dtype");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype: expected one of"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fusekit
