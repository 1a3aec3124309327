#pragma once
// Measured rungs made up by hand for the CPU tests of verify: the seeds' linear layer at 4096³
// bf16 on datasheet GH100 roofs, with counters a correct H200 run would plausibly give.
#include <string>
#include <vector>

#include "fusekit/model/traffic.hpp"
#include "fusekit/verify.hpp"

namespace fusekit::verify::testing {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr std::int64_t kSide = 4096;
inline constexpr double kOutputBytes = kSide * kSide * 2.0;  // one 4096×4096 bf16 tensor: 32 MiB
inline constexpr double kBiasBytes = kSide * 2.0;

inline model::Ladder linear_model() {
  return model::linear_ladder(kSide, kSide, kSide, DType::BF16);
}

inline model::Roofs roofs() { return model::datasheet_roofs("GH100"); }

inline KernelCounters kernel(std::string name, double read, double write, double gmma,
                             double seconds) {
  KernelCounters k;
  k.name = std::move(name);
  k.registers_per_thread = gmma > 0 ? 168 : 32;
  k.dram_read_bytes = read;
  // Most of the output leaves during the kernel, the rest when the next sweep evicts it.
  k.dram_write_bytes = 0.75 * write;
  k.dram_writeback_bytes = 0.25 * write;
  k.hmma_instructions = gmma;
  k.gmma_instructions = gmma;
  k.duration_s = seconds;
  k.cold_l2 = true;
  return k;
}

inline constexpr std::string_view kGemmKernel =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
inline constexpr std::string_view kBiasKernel =
    "void fusekit::device::map2d_vector_kernel<__nv_bfloat16, (anonymous "
    "namespace)::AddBiasOp>(__nv_bfloat16 const*, long, __nv_bfloat16 const*, __nv_bfloat16*, "
    "long, long, long, (anonymous namespace)::AddBiasOp)";
inline constexpr std::string_view kGeluKernel =
    "void fusekit::device::map2d_vector_kernel<__nv_bfloat16, (anonymous "
    "namespace)::GeluOp>(__nv_bfloat16 const*, long, __nv_bfloat16 const*, __nv_bfloat16*, "
    "long, long, long, (anonymous namespace)::GeluOp)";

// GEMM reads X and W once each (L2 serves the rereads) and writes its output.
inline KernelCounters gemm_kernel(std::string_view name = kGemmKernel) {
  return kernel(std::string(name), 2 * kOutputBytes, kOutputBytes, 1.0e6, 180e-6);
}

inline RungMeasurement rung(const model::Ladder& ladder, const std::string& name,
                            std::vector<KernelCounters> kernels) {
  RungMeasurement m;
  m.name = name;
  m.description = "synthetic " + name;
  m.kernels = std::move(kernels);
  m.match = ModelMatch::Rung;
  m.model = model::analyze(ladder, ladder.rung(name), roofs());
  m.flops = m.model->traffic.flops();
  return m;
}

// gemm (the model's unfused gemm kernel alone), unfused, cublaslt: every seed check passes.
inline std::vector<RungMeasurement> linear_rungs() {
  const model::Ladder ladder = linear_model();
  RungMeasurement gemm;
  gemm.name = "gemm";
  gemm.description = "plain GEMM";
  gemm.kernels = {gemm_kernel()};
  gemm.match = ModelMatch::Kernel;
  gemm.model =
      model::analyze(ladder, model::Rung{"gemm", {ladder.rung("unfused").kernels[0]}}, roofs());
  RungMeasurement unfused =
      rung(ladder, "unfused",
           {gemm_kernel(),
            kernel(std::string(kBiasKernel), kOutputBytes + kBiasBytes, kOutputBytes, 0, 15e-6),
            kernel(std::string(kGeluKernel), kOutputBytes, kOutputBytes, 0, 15e-6)});
  RungMeasurement fused = rung(ladder, "cublaslt", {gemm_kernel()});
  fused.kernels[0].dram_read_bytes += kBiasBytes;
  return {gemm, unfused, fused};
}

inline Report linear_report() {
  Report report;
  report.ladder = "linear";
  report.shape = "4096x4096x4096";
  report.dtype = DType::BF16;
  report.device = "NVIDIA H200";
  report.chip = "GH100";
  report.roofs = roofs();
  report.rungs = linear_rungs();
  report.verdicts = judge(report.rungs, report.thresholds);
  return report;
}

}  // namespace fusekit::verify::testing
