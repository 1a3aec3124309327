#include "fusekit/model/roofs.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace fusekit::model {

namespace {

struct Datasheet {
  std::string_view chip;
  double dram_bytes_per_s;
  double matrix_16bit_flops_per_s;
  std::optional<double> matrix_fp8_flops_per_s;
  double fp32_flops_per_s;
};

// NOTE: "GH100" stands for the H200 SXM, the Hopper part fusekit is measured on; an H100 SXM
// has the same compute roofs but 3.35 TB/s of HBM3. All rates are dense (no 2:4 sparsity).
constexpr Datasheet kDatasheets[] = {
    {"GH100", 4.8e12, 989e12, 1979e12, 67e12},
    {"GA100", 2.039e12, 312e12, std::nullopt, 19.5e12},
};

void require_positive(double value, std::string_view arg) {
  if (!(value > 0)) {
    throw std::invalid_argument(fmt::format("{}: expected > 0, got {}", arg, value));
  }
}

}  // namespace

double Roofs::matrix_flops_per_s(DType dtype) const {
  switch (dtype) {
    case DType::F16:
    case DType::BF16: return matrix_16bit_flops_per_s;
    case DType::E4M3:
    case DType::E5M2:
      if (!matrix_fp8_flops_per_s) {
        throw std::invalid_argument(
            fmt::format("matmul dtype: expected a dtype with tensor cores on {}, got {}", source,
                        dtype_name(dtype)));
      }
      return *matrix_fp8_flops_per_s;
    // NOTE: fusekit never turns on TF32, so an fp32 matmul runs at the CUDA-core rate.
    case DType::F32: return fp32_flops_per_s;
    case DType::U8: break;
  }
  throw std::invalid_argument(fmt::format(
      "matmul dtype: expected f32, f16, bf16, e4m3 or e5m2, got {}", dtype_name(dtype)));
}

Roofs datasheet_roofs(std::string_view chip) {
  for (const Datasheet& d : kDatasheets) {
    if (d.chip == chip) {
      return Roofs{d.dram_bytes_per_s, d.matrix_16bit_flops_per_s, d.matrix_fp8_flops_per_s,
                   d.fp32_flops_per_s, fmt::format("datasheet {}", d.chip)};
    }
  }
  throw std::invalid_argument(fmt::format("chip: expected GH100 or GA100, got {}", chip));
}

Roofs measured_roofs(std::string_view device, const Measurement& measured,
                     const Roofs& unmeasured) {
  require_positive(measured.copy_bytes_per_s, "copy_bytes_per_s");
  require_positive(measured.matmul_16bit_flops_per_s, "matmul_16bit_flops_per_s");
  if (measured.matmul_fp8_flops_per_s) {
    require_positive(*measured.matmul_fp8_flops_per_s, "matmul_fp8_flops_per_s");
  }
  const std::string_view borrowed = measured.matmul_fp8_flops_per_s ? "fp32" : "fp8, fp32";
  return Roofs{measured.copy_bytes_per_s, measured.matmul_16bit_flops_per_s,
               measured.matmul_fp8_flops_per_s ? measured.matmul_fp8_flops_per_s
                                               : unmeasured.matrix_fp8_flops_per_s,
               unmeasured.fp32_flops_per_s,
               fmt::format("measured on {} ({} from {})", device, borrowed, unmeasured.source)};
}

}  // namespace fusekit::model
