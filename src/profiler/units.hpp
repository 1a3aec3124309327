#pragma once
// Numbers as people read them, for the verify report and chart. Private to src/profiler.
#include <cstddef>
#include <string>
#include <vector>

namespace fusekit::verify::detail {

std::string si(double value, const std::string& unit);  // "903.2 TFLOP/s", "0 B"
std::string bytes_text(double bytes);                   // binary: "32.0 MiB"
std::string seconds_text(double seconds);               // "152.1 µs"
std::string count_text(double count);                   // "1.23M", "0"
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
