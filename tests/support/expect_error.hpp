#pragma once
// For CPU tests of argument checks: expects `f` to throw a fusekit::Error of `kind` whose message
// names `arg` (the argument checks name what they reject).
#include <gtest/gtest.h>

#include <string>

#include "fusekit/error.hpp"

namespace fusekit::testing {

template <class F>
void expect_error(F&& f, const std::string& arg, ErrorKind kind = ErrorKind::InvalidArgument) {
  try {
    f();
    ADD_FAILURE() << "expected an error naming " << arg;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(arg), std::string::npos) << e.what();
  }
}

// Expects `f` to pass every check that needs no device and stop at the first that does: `arg`'s
// pointer, which a CPU test's fake address never satisfies (InvalidArgument: memory CUDA does
// not know) or which no device can check here (NoDevice).
template <class F>
void expect_device_check(F&& f, const std::string& arg) {
  try {
    f();
    ADD_FAILURE() << "expected the device check of " << arg << " to fail";
  } catch (const Error& e) {
    EXPECT_TRUE(e.kind() == ErrorKind::InvalidArgument || e.kind() == ErrorKind::NoDevice) << e.what();
    EXPECT_NE(std::string(e.what()).find(arg + " pointer"), std::string::npos) << e.what();
  }
}

}  // namespace fusekit::testing
