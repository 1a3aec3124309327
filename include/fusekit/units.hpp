#pragma once
// Numbers as people read them, shared by `fusekit explain`, `fusekit verify` and their charts.
#include <string>
#include <string_view>

namespace fusekit::units {

std::string si(double value, std::string_view unit);  // "903.2 TFLOP/s", "0 B"
std::string bytes_text(double bytes);                  // binary: "32.0 MiB", "512 B"
std::string seconds_text(double seconds);              // "152.1 µs", "0 s"
std::string count_text(double count);                  // "1.23M", "0"

}  // namespace fusekit::units
