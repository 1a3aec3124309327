#pragma once
// Numbers as people read them, shared by `fusekit explain`, `fusekit verify` and their charts.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fusekit::units {

std::string si(double value, std::string_view unit);  // "903.2 TFLOP/s", "0 B"
std::string bytes_text(double bytes);                  // binary: "32.0 MiB", "512 B"
std::string seconds_text(double seconds);              // "152.1 µs", "0 s"
std::string count_text(double count);                  // "1.23M", "0"

// Characters shown, not bytes: "µ", "→" and "×" take several bytes in UTF-8.
std::size_t display_width(std::string_view text);
// The first `width` characters shown of `text`, "…" marking a cut (the text whole if it fits).
std::string clip(std::string_view text, std::size_t width);
// Rows as aligned columns, each line indented by two spaces: the first `left_columns` columns
// left-aligned, the rest right-aligned; no trailing spaces.
std::string table_text(const std::vector<std::vector<std::string>>& rows, std::size_t left_columns);

}  // namespace fusekit::units
