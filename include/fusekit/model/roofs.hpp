#pragma once
// The roofs of a roofline: how many bytes per second DRAM moves and how many flops per second
// each kind of unit does (dense matmuls on tensor cores at 16 and 8 bits, plain fp32 on the
// CUDA cores). They come either from a datasheet (`datasheet_roofs("GH100")`) or from
// measurements on the device at hand (`measured_roofs`), and every Roofs says which in
// `source`, so that a floor printed from them can be traced. CPU-only: nothing here touches a GPU.
#include <optional>
#include <string>
#include <string_view>

#include "fusekit/dtype.hpp"

namespace fusekit::model {

struct Roofs {
  double dram_bytes_per_s = 0;                   // bytes read + bytes written, per second
  double matrix_16bit_flops_per_s = 0;           // dense bf16/fp16 matmul on tensor cores
  std::optional<double> matrix_fp8_flops_per_s;  // dense fp8 matmul; empty: no fp8 tensor cores
  double fp32_flops_per_s = 0;                   // non-tensor fp32: epilogues, exp, reductions
  std::string source;                            // "datasheet GH100", "measured on <device> ..."

  // The rate of a matmul whose inputs are `dtype`. F32 runs on the CUDA cores (fusekit does
  // not enable TF32). Throws std::invalid_argument for U8, and for fp8 where the chip has none.
  double matrix_flops_per_s(DType dtype) const;
};

// Datasheet roofs of "GH100" (the H200 SXM part: 4.8 TB/s of HBM3e) or "GA100" (A100 SXM 80GB,
// no fp8 tensor cores). Dense rates, no sparsity. Throws std::invalid_argument for other chips.
Roofs datasheet_roofs(std::string_view chip);

// What a benchmark measured on one device.
struct Measurement {
  double copy_bytes_per_s = 0;                   // a device-to-device copy: 2 × bytes copied / s
  double matmul_16bit_flops_per_s = 0;           // a large dense bf16 or fp16 GEMM
  std::optional<double> matmul_fp8_flops_per_s;  // a large dense fp8 GEMM, when one was run
};

// Roofs measured on `device`; the roofs `measured` lacks (fp32, and fp8 when not measured)
// are taken from `unmeasured`, and `source` names both.
Roofs measured_roofs(std::string_view device, const Measurement& measured, const Roofs& unmeasured);

}  // namespace fusekit::model
