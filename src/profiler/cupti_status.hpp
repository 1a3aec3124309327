#pragma once
// CUPTI results as fusekit errors. Private to src/profiler.
#include <cupti_result.h>

#include <cstddef>
#include <string_view>

namespace fusekit::verify::detail {

// Throws Error(Profiler) when `result` is not CUPTI_SUCCESS: "<what>: <CUPTI result name>",
// followed by the fix where there is a known one (insufficient privileges, another profiler).
void check_cupti(CUptiResult result, std::string_view what);

// A CUPTI parameter struct, zeroed, with its structSize set (`struct_size` is the header's
// <Type>_STRUCT_SIZE, which versions the struct).
template <class Params>
Params cupti_params(std::size_t struct_size) {
  Params params{};
  params.structSize = struct_size;
  return params;
}

}  // namespace fusekit::verify::detail
