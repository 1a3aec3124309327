// Launcher of the pointwise chain kernel (fusekit/pointwise_chain.hpp): validation, the
// vector-or-scalar decision, dtype dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "../epilogue/device_chain.hpp"
#include "../row/row_launch.cuh"
#include "fusekit/device/pointwise/chain_map.cuh"
#include "fusekit/pointwise_chain.hpp"
#include "fusekit/runtime.hpp"

namespace fusekit {

namespace {

// The tensors a chain may bind that hold x's dtype, with their argument names.
struct Bound {
  const char* name;
  const TensorView* view;
};

void validate_args(const PointwiseChainArgs& a, bool quantized) {
  check::structure("x", a.x);
  check::rank("x", a.x, 2);
  check::dtype("x", a.x, {DType::F32, DType::F16, DType::BF16});
  const std::int64_t m = a.x.shape[0], n = a.x.shape[1];
  // The kernels index a row's columns (and a gated pair's up column, up to 2·N) in 32 bits.
  require(n <= INT32_MAX / 2, "x columns", "at most 2^30 - 1", n);
  require(a.chain.nodes.size() <= static_cast<std::size_t>(device::kMaxChainNodes), "chain nodes",
          "at most " + std::to_string(device::kMaxChainNodes), a.chain.nodes.size());
  validate(a.chain, a.tensors, m, n);
  const std::int64_t n_out = epilogue_output_columns(a.chain, n);
  check::structure("y", a.y);
  check::shape("y", a.y, {m, n_out});
  const DType out = quantized ? DType::E4M3 : a.x.dtype;
  require(a.y.dtype == out, "y dtype", dtype_name(out), dtype_name(a.y.dtype));
  for (const Bound& b : {Bound{"source", &a.tensors.source}, Bound{"bias", &a.tensors.bias},
                         Bound{"residual", &a.tensors.residual}, Bound{"aux", &a.tensors.aux}})
    if (!b.view->empty())
      require(b.view->dtype == a.x.dtype, std::string("epilogue ") + b.name + " dtype", dtype_name(a.x.dtype),
              dtype_name(b.view->dtype));
  require(m * n_out <= static_cast<std::int64_t>(UINT32_MAX), "x elements", "fewer than 2^32 outputs", m * n_out);
  // An element of y is written after its own x, residual and source elements are read, by the
  // thread that read them: in place is safe through identical views only.
  check::disjoint("y", a.y, "x", a.x, check::InPlace::Allowed);
  check::disjoint("y", a.y, "epilogue residual", a.tensors.residual, check::InPlace::Allowed);
  check::disjoint("y", a.y, "epilogue source", a.tensors.source, check::InPlace::Allowed);
  validate_disjoint(a.tensors, "y", a.y, {{"x", &a.x}});

  for (const Bound& b : {Bound{"source", &a.tensors.source}, Bound{"bias", &a.tensors.bias},
                         Bound{"residual", &a.tensors.residual}, Bound{"aux", &a.tensors.aux},
                         Bound{"row_scale", &a.tensors.row_scale}, Bound{"col_scale", &a.tensors.col_scale}})
    if (!b.view->empty()) check::on_current_device(std::string("epilogue ") + b.name, *b.view);
  check::on_current_device("x", a.x);
  check::on_current_device("y", a.y);
  for (auto [name, ptr] : {std::pair<const char*, const float*>{"epilogue quant_scale", a.tensors.quant_scale},
                           {"epilogue amax", a.tensors.amax}})
    if (ptr != nullptr) check::on_current_device(name, ptr);
}

// Whether every row and tensor allows 16-byte chunks of `chunk` elements at the columns each
// thread touches: whole chunks of output columns and gate blocks, aligned rows.
bool vectorizable(const PointwiseChainArgs& a, std::int64_t chunk) {
  const std::int64_t n = a.x.shape[1];
  if (n % chunk != 0 || epilogue_output_columns(a.chain, n) % chunk != 0) return false;
  if (a.chain.gated() && a.chain.gate_block() % chunk != 0) return false;
  const std::size_t bytes = static_cast<std::size_t>(chunk) * a.x.element_size();
  for (const TensorView* t : {&a.x, &a.tensors.source, &a.tensors.bias, &a.tensors.residual, &a.tensors.aux})
    if (!rows::vector_aligned(*t, bytes)) return false;
  return rows::vector_aligned(a.y, static_cast<std::size_t>(chunk) * a.y.element_size());
}

// The shared-memory planes the vector path stages for `chain` (device::ChainStaging).
device::ChainStaging staging_of(const EpilogueSpec& chain) {
  device::ChainStaging s;
  bool after_gate = !chain.gated(), source = false, residual = false;
  for (const EpilogueNode& node : chain.nodes) {
    if (node.op == EpilogueOp::SwiGlu || node.op == EpilogueOp::GeGlu) after_gate = true;
    if (!after_gate) continue;
    source |= node.op == EpilogueOp::AddSource;
    residual |= node.op == EpilogueOp::Residual;
  }
  if (chain.gated()) s.up = s.planes++;
  if (source) s.source = s.planes++;
  if (residual) s.residual = s.planes++;
  return s;
}

// Whether `chain` is the compiled chain Program's sequence of ops.
template <class Program>
bool is_compiled_as(const EpilogueSpec& chain) {
  if (chain.nodes.size() != static_cast<std::size_t>(Program::kCount)) return false;
  for (int k = 0; k < Program::kCount; ++k)
    if (chain.nodes[static_cast<std::size_t>(k)].op != Program::kOpsOf[k]) return false;
  return true;
}

template <class T, class Out, int kE, class Program = device::InterpretedChain>
void launch(const PointwiseChainArgs& a, cudaStream_t stream) {
  device::PointwiseChainParams p;
  p.x = a.x.data;
  p.ld_x = a.x.strides[0];
  p.y = a.y.data;
  p.ld_y = a.y.strides[0];
  p.rows = static_cast<std::uint32_t>(a.x.shape[0]);
  p.chunks_per_row = static_cast<std::uint32_t>(epilogue_output_columns(a.chain, a.x.shape[1]) / kE);
  p.chain = epilogue::make_device_chain(a.chain, a.tensors, a.x.dtype);
  const std::uint64_t chunks = std::uint64_t{p.rows} * p.chunks_per_row;
  if (chunks == 0) return;
  const auto kernel = device::pointwise_chain_kernel<T, Out, kE, Program>;
  if constexpr (kE == 1) {
    const auto blocks = static_cast<unsigned>((chunks + device::kChainThreads - 1) / device::kChainThreads);
    kernel<<<blocks, device::kChainThreads, 0, stream>>>(p);
  } else {
    p.staging = staging_of(a.chain);
    p.row_of_chunk = cutlass::FastDivmod(static_cast<int>(p.chunks_per_row));
    const std::size_t shared_bytes = std::size_t{device::kChunkBytes} * device::kChainTileChunks *
                                     static_cast<std::size_t>(p.staging.planes) * device::kChainBuffers;
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
               "pointwise_chain_kernel shared memory");
    int per_sm = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, device::kChainThreads, shared_bytes),
               "pointwise_chain_kernel occupancy");
    require(per_sm >= 1, "pointwise_chain_kernel resident CTAs", ">= 1 with this shared memory", per_sm);
    const std::uint64_t tiles = (chunks + device::kChainTileChunks - 1) / device::kChainTileChunks;
    const auto blocks = static_cast<unsigned>(
        std::min<std::uint64_t>(tiles, std::uint64_t{static_cast<unsigned>(per_sm)} * current_device_info().sm_count));
    kernel<<<blocks, device::kChainThreads, shared_bytes, stream>>>(p);
  }
  check_launch("pointwise_chain_kernel");
}

// The vector path with the first of device::CompiledChains that is `a`'s chain; false if none is.
template <class T, std::size_t kIndex = 0>
bool launch_compiled(const PointwiseChainArgs& a, cudaStream_t stream) {
  if constexpr (kIndex == std::tuple_size_v<device::CompiledChains>) {
    return false;
  } else {
    using Program = std::tuple_element_t<kIndex, device::CompiledChains>;
    if (!is_compiled_as<Program>(a.chain)) return launch_compiled<T, kIndex + 1>(a, stream);
    launch<T, T, device::kChunkBytes / sizeof(T), Program>(a, stream);
    return true;
  }
}

template <class T, class Out>
void dispatch(const PointwiseChainArgs& a, cudaStream_t stream) {
  constexpr int kVector = device::kChunkBytes / sizeof(T);
  if (!vectorizable(a, kVector)) return launch<T, Out, 1>(a, stream);
  if constexpr (std::is_same_v<T, Out>) {
    if (launch_compiled<T>(a, stream)) return;
  }
  launch<T, Out, kVector>(a, stream);
}

template <class T>
void dispatch_out(const PointwiseChainArgs& a, bool quantized, cudaStream_t stream) {
  if (quantized) dispatch<T, __nv_fp8_e4m3>(a, stream);
  else dispatch<T, T>(a, stream);
}

}  // namespace

void pointwise_chain(const PointwiseChainArgs& a, cudaStream_t stream) {
  const bool quantized = a.chain.uses(EpilogueOp::QuantizeE4M3);
  validate_args(a, quantized);
  switch (a.x.dtype) {
    case DType::F32: return dispatch_out<float>(a, quantized, stream);
    case DType::F16: return dispatch_out<__half>(a, quantized, stream);
    case DType::BF16: return dispatch_out<__nv_bfloat16>(a, quantized, stream);
    default: throw_invalid("x dtype", "f32, f16 or bf16", dtype_name(a.x.dtype));
  }
}

}  // namespace fusekit
