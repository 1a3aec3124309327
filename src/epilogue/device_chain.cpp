// The device form of an epilogue chain (device_chain.hpp).
#include "device_chain.hpp"

#include <cstddef>

namespace fusekit::epilogue {

bool position_independent(EpilogueOp op) {
  switch (op) {
    case EpilogueOp::Scale:
    case EpilogueOp::Relu:
    case EpilogueOp::GeluTanh:
    case EpilogueOp::GeluErf:
    case EpilogueOp::Silu:
    case EpilogueOp::Clamp:
    case EpilogueOp::Cast: return true;
    default: return false;
  }
}

device::Chain make_device_chain(const EpilogueSpec& spec, const EpilogueTensors& t, DType dtype) {
  device::Chain c{};
  c.count = static_cast<int>(spec.nodes.size());
  c.uniform_prefix = c.count;
  c.gate = c.count;
  for (int i = 0; i < c.count; ++i) {
    const EpilogueNode& node = spec.nodes[static_cast<std::size_t>(i)];
    c.nodes[i] = {node.op, node.p0, node.p1, node.dtype};
    if (!position_independent(node.op) && c.uniform_prefix == c.count) c.uniform_prefix = i;
    if (node.op == EpilogueOp::SwiGlu || node.op == EpilogueOp::GeGlu) c.gate = i;
  }
  c.dtype = dtype;
  c.source = t.source.data;
  c.ld_source = t.source.empty() ? 0 : t.source.strides[0];
  c.bias = t.bias.data;
  c.row_scale = static_cast<const float*>(t.row_scale.data);
  c.col_scale = static_cast<const float*>(t.col_scale.data);
  c.residual = t.residual.data;
  c.ld_residual = t.residual.empty() ? 0 : t.residual.strides[0];
  c.aux = t.aux.data;
  c.ld_aux = t.aux.empty() ? 0 : t.aux.strides[0];
  c.quant_scale = t.quant_scale;
  c.amax = t.amax;
  return c;
}

}  // namespace fusekit::epilogue
