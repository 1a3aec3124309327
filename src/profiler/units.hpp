#pragma once
// Numbers as people read them, for the verify report and chart. Private to src/profiler.
#include <cstddef>
#include <string>
#include <vector>

#include "fusekit/units.hpp"

namespace fusekit::verify::detail {

using units::bytes_text;
using units::count_text;
using units::seconds_text;
using units::si;
// A demangled kernel name without its return type, parameter list and namespaces:
// "void fusekit::device::map2d_vector_kernel<__nv_bfloat16, (anonymous namespace)::GeluOp>(...)"
// becomes "map2d_vector_kernel<__nv_bfloat16, GeluOp>".
std::string short_kernel_name(const std::string& name);
// `text` with &, <, > and quotes escaped for XML.
std::string xml_escape(const std::string& text);
// The first `width` characters shown (UTF-8 aware) of `text`, "…" marking a cut.
std::string clip(const std::string& text, std::size_t width);
std::size_t display_width(const std::string& text);
// Rows as aligned columns, each line indented by two spaces: the first `left_columns` columns
// left-aligned, the rest right-aligned.
std::string table_text(const std::vector<std::vector<std::string>>& rows, std::size_t left_columns);

}  // namespace fusekit::verify::detail
