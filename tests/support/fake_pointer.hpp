#pragma once
// For CPU tests of argument checks: a non-null, 16-byte aligned address that is never
// dereferenced (the checks that need no device read no memory).
namespace fusekit::testing {

inline void* fake_pointer() {
  alignas(16) static char storage[16];
  return storage;
}

}  // namespace fusekit::testing
