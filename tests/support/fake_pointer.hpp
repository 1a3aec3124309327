#pragma once
// For CPU tests of argument checks: non-null, 16-byte aligned addresses that are never
// dereferenced (the checks that need no device read no memory).
#include <cstddef>
#include <cstdint>

namespace fusekit::testing {

inline void* fake_pointer() {
  alignas(16) static char storage[16];
  return storage;
}

// Distinct fake addresses, `kFakeSlotBytes` apart, for checks that compare where tensors lie
// (overlap): never dereferenced, not even formed from a real object.
inline constexpr std::uintptr_t kFakeSlotBytes = std::uintptr_t{1} << 32;
inline void* fake_address(std::size_t slot, std::size_t offset_bytes = 0) {
  return reinterpret_cast<void*>(kFakeSlotBytes * (slot + 1) + offset_bytes);
}

}  // namespace fusekit::testing
