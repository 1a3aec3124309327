// The roofline chart of a verify report, as hand-written SVG text.
//
// Log-log axes: x is arithmetic intensity (modelled flops per measured DRAM byte), y is achieved
// FLOP/s (modelled flops per measured second). The DRAM roof rises at the memory bandwidth until
// it meets the matrix roof of the ladder's dtype; the fp32 roof is drawn dashed. Each kernel is a
// numbered point, coloured by rung, with a key on the right.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>

#include "fusekit/verify.hpp"
#include "units.hpp"

namespace fusekit::verify {

namespace {

using detail::xml_escape;

constexpr double kWidth = 980;
constexpr double kMinHeight = 640;
constexpr double kLeft = 112, kRight = 300, kTop = 56, kBottom = 72;
constexpr double kKeyLineHeight = 18;
constexpr double kPointRadius = 7;
constexpr double kMinIntensity = 0.1;  // FLOP/B: the left edge shows at least this far
constexpr double kRidgeHeadroom = 10;  // the right edge shows at least 10× the matrix ridge
constexpr double kPointMargin = 2;     // points stay this factor inside the edges
constexpr double kRoofHeadroom = 2;    // the top edge sits 2× above the matrix roof
constexpr std::size_t kKeyTextWidth = 44;
constexpr std::size_t kUnplottedWidth = 120;
constexpr std::string_view kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr std::string_view kSiPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
constexpr int kDecade = 3;  // SI prefixes step by three decades

struct Point {
  std::size_t number = 0;  // 1-based, as drawn
  std::size_t rung = 0;
  double intensity = 0, flops_per_s = 0;
  std::string label, title;
};

// A power of ten with an SI prefix: "0.01", "10", "1k" bare; "100 GFLOP/s" with a unit.
std::string decade_label(int exponent, std::string_view unit) {
  std::string number;
  std::string_view prefix;
  if (exponent < 0) {
    number = fmt::format("{:g}", std::pow(10.0, exponent));
  } else {
    const int step = std::min(exponent / kDecade, static_cast<int>(std::size(kSiPrefixes)) - 1);
    number = fmt::format("{:g}", std::pow(10.0, exponent - step * kDecade));
    prefix = kSiPrefixes[step];
  }
  if (unit.empty()) return number + std::string(prefix);
  return fmt::format("{} {}{}", number, prefix, unit);
}

class Axes {
 public:
  Axes(double x_lo, double x_hi, double y_lo, double y_hi, double plot_height)
      : x_lo_(x_lo), x_hi_(x_hi), y_lo_(y_lo), y_hi_(y_hi), plot_height_(plot_height) {}
  double x(double intensity) const {
    return kLeft + (std::log10(intensity) - x_lo_) / (x_hi_ - x_lo_) * plot_width();
  }
  double y(double rate) const {
    return kTop + (y_hi_ - std::log10(rate)) / (y_hi_ - y_lo_) * plot_height_;
  }
  double plot_width() const { return kWidth - kLeft - kRight; }
  double plot_height() const { return plot_height_; }
  int x_lo() const { return static_cast<int>(x_lo_); }
  int x_hi() const { return static_cast<int>(x_hi_); }
  int y_lo() const { return static_cast<int>(y_lo_); }
  int y_hi() const { return static_cast<int>(y_hi_); }

 private:
  double x_lo_, x_hi_, y_lo_, y_hi_, plot_height_;
};

std::vector<Point> points_of(const Report& report, std::vector<std::string>& unplotted) {
  constexpr std::size_t kNameWidth = 60;
  std::vector<Point> points;
  std::size_t number = 0;
  for (std::size_t r = 0; r < report.rungs.size(); ++r) {
    const RungMeasurement& rung = report.rungs[r];
    for (std::size_t i = 0; i < rung.kernels.size(); ++i) {
      const KernelCounters& k = rung.kernels[i];
      const double flops = rung.kernel_flops(i);
      const model::KernelReport* m = rung.modelled(i);
      const std::string label =
          fmt::format("{} · {}", rung.name,
                      m ? m->name : detail::clip(detail::short_kernel_name(k.name), kKeyTextWidth));
      if (flops <= 0 || k.dram_bytes() <= 0 || k.duration_s <= 0) {
        unplotted.push_back(fmt::format(
            "{}: {} (flops {}, DRAM {}, time {})", label,
            detail::clip(detail::short_kernel_name(k.name), kNameWidth), detail::si(flops, "FLOP"),
            detail::bytes_text(k.dram_bytes()), detail::seconds_text(k.duration_s)));
        continue;
      }
      Point p;
      p.number = ++number;
      p.rung = r;
      p.intensity = flops / k.dram_bytes();
      p.flops_per_s = flops / k.duration_s;
      p.label = label;
      p.title = fmt::format("{}: {}\n{:.2f} FLOP/B, {}, {} DRAM, {}", rung.name, k.name,
                            p.intensity, detail::si(p.flops_per_s, "FLOP/s"),
                            detail::bytes_text(k.dram_bytes()), detail::seconds_text(k.duration_s));
      points.push_back(std::move(p));
    }
  }
  return points;
}

}  // namespace

std::string roofline_svg(const Report& report) {
  const double bandwidth = report.roofs.dram_bytes_per_s;
  const double matrix = report.roofs.matrix_flops_per_s(report.dtype);
  const double fp32 = report.roofs.fp32_flops_per_s;
  const double matrix_ridge = matrix / bandwidth;
  const double fp32_ridge = fp32 / bandwidth;

  std::vector<std::string> unplotted;
  const std::vector<Point> points = points_of(report, unplotted);

  double x_min = kMinIntensity, x_max = matrix_ridge * kRidgeHeadroom;
  double y_min = bandwidth * kMinIntensity, y_max = matrix * kRoofHeadroom;
  for (const Point& p : points) {
    x_min = std::min(x_min, p.intensity / kPointMargin);
    x_max = std::max(x_max, p.intensity * kPointMargin);
    y_min = std::min(y_min, p.flops_per_s / kPointMargin);
    y_max = std::max(y_max, p.flops_per_s * kPointMargin);
  }
  const double key_height = kTop + kKeyLineHeight * static_cast<double>(points.size() + 2);
  const double height = std::max(kMinHeight, key_height + kBottom) +
                        kKeyLineHeight * static_cast<double>(unplotted.size());
  const double plot_height = std::max(kMinHeight, key_height + kBottom) - kTop - kBottom;
  const Axes axes(std::floor(std::log10(x_min)), std::ceil(std::log10(x_max)),
                  std::floor(std::log10(y_min)), std::ceil(std::log10(y_max)), plot_height);
  const double left = kLeft, right = kLeft + axes.plot_width();
  const double top = kTop, bottom = kTop + axes.plot_height();

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n",
      kWidth, height);
  svg += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", kWidth, height);
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">roofline: {} {} {} on "
      "{} ({})</text>\n",
      left, xml_escape(report.ladder), xml_escape(report.shape), dtype_name(report.dtype),
      xml_escape(report.device), xml_escape(report.chip));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"42\" fill=\"#555\">roofs: {}; L2 swept {}</text>\n",
                     left, xml_escape(report.roofs.source),
                     report.flush == Flush::EachKernel ? "before each kernel" : "around each run");

  // Grid and tick labels, one per decade.
  svg += "<g class=\"grid\" stroke=\"#ddd\" stroke-width=\"1\">\n";
  for (int e = axes.x_lo(); e <= axes.x_hi(); ++e) {
    const double x = axes.x(std::pow(10.0, e));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>\n", x,
                       top, bottom);
  }
  for (int e = axes.y_lo(); e <= axes.y_hi(); ++e) {
    const double y = axes.y(std::pow(10.0, e));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{1:.1f}\" y2=\"{2:.1f}\"/>\n",
                       left, right, y);
  }
  svg += "</g>\n<g class=\"ticks\" fill=\"#333\">\n";
  for (int e = axes.x_lo(); e <= axes.x_hi(); ++e) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       axes.x(std::pow(10.0, e)), bottom + 18, decade_label(e, ""));
  }
  for (int e = axes.y_lo(); e <= axes.y_hi(); ++e) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                       axes.y(std::pow(10.0, e)) + 4, decade_label(e, "FLOP/s"));
  }
  svg += "</g>\n";
  svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#333\"/>\n",
      left, top, axes.plot_width(), axes.plot_height());
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">arithmetic intensity (modelled "
      "FLOP per measured DRAM byte)</text>\n",
      (left + right) / 2, bottom + 44);
  svg += fmt::format(
      "<text transform=\"translate(16 {:.1f}) rotate(-90)\" text-anchor=\"middle\">achieved "
      "FLOP/s (modelled FLOP per measured second)</text>\n",
      (top + bottom) / 2);

  // The roofs. The DRAM slope starts where it enters the plot.
  const double x_start =
      std::max(std::pow(10.0, axes.x_lo()), std::pow(10.0, axes.y_lo()) / bandwidth);
  const double x_end = std::pow(10.0, axes.x_hi());
  svg += fmt::format(
      "<polyline class=\"roof-memory-matrix\" fill=\"none\" stroke=\"#000\" stroke-width=\"2\" "
      "points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
      axes.x(x_start), axes.y(bandwidth * x_start), axes.x(matrix_ridge), axes.y(matrix),
      axes.x(x_end), axes.y(matrix));
  svg += fmt::format(
      "<line class=\"roof-fp32\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
      "stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
      axes.x(fp32_ridge), axes.y(fp32), axes.x(x_end), axes.y(fp32));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{} matrix {}</text>\n",
                     right - 6, axes.y(matrix) - 6, dtype_name(report.dtype),
                     detail::si(matrix, "FLOP/s"));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">fp32 {}</text>\n",
                     right - 6, axes.y(fp32) - 6, detail::si(fp32, "FLOP/s"));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"start\">DRAM {}</text>\n",
                     axes.x(x_start) + 8, axes.y(bandwidth * x_start) - 8,
                     detail::si(bandwidth, "B/s"));

  // The kernels, and their key.
  svg += "<g class=\"kernels\">\n";
  constexpr double kNear = 2 * kPointRadius;  // points closer than this share a spot
  constexpr double kLabelStep = 12;           // so their numbers are stacked
  std::vector<std::pair<double, double>> drawn;
  for (const Point& p : points) {
    const std::string_view colour = kPalette[p.rung % std::size(kPalette)];
    const double x = axes.x(p.intensity), y = axes.y(p.flops_per_s);
    svg += fmt::format(
        "<circle class=\"kernel\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.0f}\" fill=\"{}\" "
        "stroke=\"#000\"><title>{}</title></circle>\n",
        x, y, kPointRadius, colour, xml_escape(p.title));
    const auto near = std::count_if(drawn.begin(), drawn.end(), [&](const auto& d) {
      return std::hypot(d.first - x, d.second - y) < kNear;
    });
    drawn.emplace_back(x, y);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n",
                       x + kPointRadius + 2,
                       y - kPointRadius + kLabelStep * static_cast<double>(near), p.number);
  }
  svg += "</g>\n<g class=\"key\">\n";
  const double key_x = right + 24;
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-weight=\"bold\">kernels</text>\n", key_x,
                     top + 4);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const double y = top + kKeyLineHeight * static_cast<double>(i + 1) + 4;
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" stroke=\"#000\"/><text "
        "x=\"{:.1f}\" y=\"{:.1f}\">{} {}</text>\n",
        key_x + 5, y - 4, kPalette[p.rung % std::size(kPalette)], key_x + 16, y, p.number,
        xml_escape(detail::clip(p.label, kKeyTextWidth)));
  }
  svg += "</g>\n";
  for (std::size_t i = 0; i < unplotted.size(); ++i) {
    svg += fmt::format(
        "<text class=\"unplotted\" x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#a00\">not plotted: "
        "{}</text>\n",
        left, bottom + kBottom + kKeyLineHeight * static_cast<double>(i),
        xml_escape(detail::clip(unplotted[i], kUnplottedWidth)));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace fusekit::verify
