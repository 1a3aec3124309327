#pragma once
// Numbers as people read them, for the verify report and chart. Private to src/profiler.
#include <cstddef>
#include <string>
#include <vector>

#include "fusekit/units.hpp"

namespace fusekit::verify::detail {

using units::bytes_text;
using units::clip;
using units::count_text;
using units::display_width;
using units::seconds_text;
using units::si;
using units::table_text;
// A demangled kernel name without its return type, parameter list and namespaces:
// "void fusekit::device::map2d_vector_kernel<__nv_bfloat16, (anonymous namespace)::GeluOp>(...)"
// becomes "map2d_vector_kernel<__nv_bfloat16, GeluOp>".
std::string short_kernel_name(const std::string& name);
// `text` with &, <, > and quotes escaped for XML.
std::string xml_escape(const std::string& text);

}  // namespace fusekit::verify::detail
