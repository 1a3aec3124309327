#include "units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <string_view>

namespace fusekit::verify::detail {

std::string short_kernel_name(const std::string& name) {
  constexpr std::string_view kVoid = "void ";
  constexpr std::string_view kAnonymous = "(anonymous namespace)::";
  std::string out = name.starts_with(kVoid) ? name.substr(kVoid.size()) : name;
  for (auto at = out.find(kAnonymous); at != std::string::npos; at = out.find(kAnonymous)) {
    out.erase(at, kAnonymous.size());
  }
  // The parameter list: the first '(' outside template arguments.
  int depth = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '<') ++depth;
    if (out[i] == '>') --depth;
    if (out[i] == '(' && depth == 0) {
      out.resize(i);
      break;
    }
  }
  // Namespace and class qualifiers: every identifier followed by "::".
  std::string bare;
  std::size_t word = 0;  // where the identifier being read began in `bare`
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == ':' && i + 1 < out.size() && out[i + 1] == ':') {
      bare.resize(word);
      ++i;
      continue;
    }
    const bool identifier = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!identifier) word = bare.size() + 1;
    bare += c;
  }
  return bare;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace fusekit::verify::detail
