// The verify report's text, JSON and SVG, on synthetic counters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusekit/verify.hpp"
#include "profiler/synthetic_rungs.hpp"

namespace fusekit::verify {
namespace {

using namespace testing;

std::size_t occurrences(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A small well-formedness check: every tag closes in order, and text and attributes hold no
// raw '<' and no '&' outside an entity.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const auto semi = xml.find(';', i);
      const std::string entity = xml.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;") {
        return "bad entity " + entity;
      }
      i = semi + 1;
      continue;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    const auto close = xml.find('>', i);
    if (close == std::string::npos) return "unclosed tag";
    const std::string tag = xml.substr(i + 1, close - i - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside a tag: " + tag;
    if (tag.find('&') != std::string::npos) {
      // Attributes may hold entities; check them like text.
      const std::string inner = xml_problem(tag.substr(tag.find(' ') + 1));
      if (!inner.empty()) return inner;
    }
    if (tag.front() == '/') {
      if (open.empty() || open.back() != tag.substr(1))
        return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = close + 1;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

TEST(ReportText, ListsEveryKernelTotalsAndVerdicts) {
  const Report report = linear_report();
  const std::string text = report_text(report);
  EXPECT_NE(text.find("verify linear 4096x4096x4096 bf16 on NVIDIA H200 (GH100)"),
            std::string::npos)
      << text;
  for (const char* rung : {"rung gemm:", "rung unfused:", "rung cublaslt:"}) {
    EXPECT_NE(text.find(rung), std::string::npos) << rung << "\n" << text;
  }
  EXPECT_NE(text.find("model: kernel gemm alone"), std::string::npos) << text;
  const std::string tables = text.substr(0, text.find("\nverdicts\n"));
  EXPECT_EQ(occurrences(tables, "sm90_xmma_gemm"), 3u) << text;
  EXPECT_EQ(occurrences(tables, "map2d_vector_kernel<__nv_bfloat16, AddBiasOp>"), 1u) << text;
  EXPECT_EQ(occurrences(text, "\n  total"), 3u) << text;
  EXPECT_NE(text.find("224.0 MiB"), std::string::npos) << text;  // unfused measured = modelled
  EXPECT_NE(text.find("1.00M"), std::string::npos) << text;      // GMMA instructions
  EXPECT_EQ(occurrences(text, "\n  PASS"), 4u) << text;
  EXPECT_NE(text.find("DRAM drop"), std::string::npos) << text;
}

TEST(ReportJson, HoldsCountersModelAndVerdicts) {
  const Report report = linear_report();
  const nlohmann::json j = to_json(report);
  EXPECT_EQ(j["ladder"], "linear");
  EXPECT_EQ(j["chip"], "GH100");
  EXPECT_EQ(j["flush"], "each-kernel");
  EXPECT_EQ(j["metrics"].size(), std::size(kMetrics));
  ASSERT_EQ(j["rungs"].size(), 3u);
  const nlohmann::json& unfused = j["rungs"][1];
  EXPECT_EQ(unfused["name"], "unfused");
  EXPECT_EQ(unfused["model_match"], "rung");
  ASSERT_EQ(unfused["kernels"].size(), 3u);
  const nlohmann::json& bias = unfused["kernels"][1];
  EXPECT_EQ(bias["model_kernel"], "bias_add");
  EXPECT_DOUBLE_EQ(bias["dram_bytes"].get<double>(), 2 * kOutputBytes + kBiasBytes);
  EXPECT_DOUBLE_EQ(bias["modelled_bytes"].get<double>(), 2 * kOutputBytes + kBiasBytes);
  EXPECT_EQ(bias["gmma_instructions"], 0.0);
  EXPECT_TRUE(bias["cold_l2"].get<bool>());
  EXPECT_DOUBLE_EQ(unfused["dram_bytes"].get<double>(), 7 * kOutputBytes + kBiasBytes);
  EXPECT_EQ(j["rungs"][0]["model_match"], "kernel");
  ASSERT_EQ(j["verdicts"].size(), 4u);
  for (const nlohmann::json& v : j["verdicts"]) EXPECT_EQ(v["outcome"], "PASS") << v.dump();
  EXPECT_DOUBLE_EQ(j["roofs"]["matrix_flops_per_s"].get<double>(), 989e12);
}

TEST(ReportJson, MissingCountersAreNull) {
  Report report = linear_report();
  report.rungs[2].kernels[0].gmma_instructions.reset();
  report.rungs[2].match = ModelMatch::None;
  report.rungs[2].model.reset();
  const nlohmann::json j = to_json(report);
  EXPECT_TRUE(j["rungs"][2]["kernels"][0]["gmma_instructions"].is_null());
  EXPECT_TRUE(j["rungs"][2]["kernels"][0]["model_kernel"].is_null());
  EXPECT_TRUE(j["rungs"][2]["model"].is_null());
}

TEST(RooflineSvg, OnePointPerKernelUnderTwoRoofs) {
  const Report report = linear_report();
  const std::string svg = roofline_svg(report);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg.substr(0, 80);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(occurrences(svg, "<circle class=\"kernel\""), 5u);  // 1 + 3 + 1 kernels
  EXPECT_EQ(occurrences(svg, "class=\"roof-memory-matrix\""), 1u);
  EXPECT_EQ(occurrences(svg, "class=\"roof-fp32\""), 1u);
  EXPECT_EQ(occurrences(svg, "not plotted"), 0u);
  // Template kernel names are escaped, never raw.
  EXPECT_NE(svg.find("map2d_vector_kernel&lt;__nv_bfloat16"), std::string::npos);
  EXPECT_EQ(svg.find("map2d_vector_kernel<"), std::string::npos);
  for (const char* label :
       {"gemm · gemm", "unfused · bias_add", "unfused · gelu", "cublaslt · gemm_gelu_bias"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
}

TEST(RooflineSvg, KernelsWithoutFlopsOrBytesAreListedNotDrawn) {
  Report report = linear_report();
  // An extra kernel the model cannot place, in a rung of two: no flops known.
  report.rungs[2].kernels.push_back(kernel("splitKreduce_kernel", kOutputBytes, 0, 0, 5e-6));
  report.rungs[1].kernels[2].duration_s = 0;
  const std::string svg = roofline_svg(report);
  EXPECT_EQ(xml_problem(svg), "");
  // cublaslt now has two kernels for one modelled one: neither has known flops.
  EXPECT_EQ(occurrences(svg, "<circle class=\"kernel\""), 3u);
  EXPECT_EQ(occurrences(svg, "not plotted"), 3u);
  EXPECT_NE(svg.find("splitKreduce_kernel"), std::string::npos);
}

TEST(RooflineSvg, PointsLieInsideThePlot) {
  const std::string svg = roofline_svg(linear_report());
  for (auto at = svg.find("<circle class=\"kernel\""); at != std::string::npos;
       at = svg.find("<circle class=\"kernel\"", at + 1)) {
    const double cx = std::stod(svg.substr(svg.find("cx=\"", at) + 4));
    const double cy = std::stod(svg.substr(svg.find("cy=\"", at) + 4));
    EXPECT_GT(cx, 0);
    EXPECT_LT(cx, 980);
    EXPECT_GT(cy, 0);
    EXPECT_LT(cy, 640);
  }
}

}  // namespace
}  // namespace fusekit::verify
