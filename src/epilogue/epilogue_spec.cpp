#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "fusekit/epilogue.hpp"
#include "fusekit/error.hpp"

namespace fusekit {

namespace {
constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * kFnvPrime;
  return h;
}

bool is_gate(EpilogueOp op) { return op == EpilogueOp::SwiGlu || op == EpilogueOp::GeGlu; }

// Nodes whose result at (i, j) depends on i or j through a tensor or a column pairing.
bool position_dependent(EpilogueOp op) {
  switch (op) {
    case EpilogueOp::AddSource:
    case EpilogueOp::ColumnBias:
    case EpilogueOp::RowScale:
    case EpilogueOp::ColumnScale:
    case EpilogueOp::Residual:
    case EpilogueOp::SwiGlu:
    case EpilogueOp::GeGlu:
    case EpilogueOp::StoreAux: return true;
    default: return false;
  }
}
}  // namespace

std::string_view epilogue_op_name(EpilogueOp op) {
  switch (op) {
    case EpilogueOp::Scale: return "scale";
    case EpilogueOp::AddSource: return "add_source";
    case EpilogueOp::ColumnBias: return "bias";
    case EpilogueOp::RowScale: return "row_scale";
    case EpilogueOp::ColumnScale: return "column_scale";
    case EpilogueOp::Residual: return "residual";
    case EpilogueOp::Relu: return "relu";
    case EpilogueOp::GeluTanh: return "gelu_tanh";
    case EpilogueOp::GeluErf: return "gelu_erf";
    case EpilogueOp::Silu: return "silu";
    case EpilogueOp::SwiGlu: return "swiglu";
    case EpilogueOp::GeGlu: return "geglu";
    case EpilogueOp::Clamp: return "clamp";
    case EpilogueOp::Cast: return "cast";
    case EpilogueOp::QuantizeE4M3: return "quantize_e4m3";
    case EpilogueOp::StoreAux: return "store_aux";
  }
  return "?";
}

#define FUSEKIT_NODE(builder, ...)                   \
  EpilogueSpec& EpilogueSpec::builder {              \
    nodes.push_back(EpilogueNode{__VA_ARGS__});      \
    return *this;                                    \
  }
FUSEKIT_NODE(scale(float alpha), EpilogueOp::Scale, alpha)
FUSEKIT_NODE(add_source(float beta), EpilogueOp::AddSource, beta)
FUSEKIT_NODE(bias(), EpilogueOp::ColumnBias)
FUSEKIT_NODE(row_scale(), EpilogueOp::RowScale)
FUSEKIT_NODE(column_scale(), EpilogueOp::ColumnScale)
FUSEKIT_NODE(residual(), EpilogueOp::Residual)
FUSEKIT_NODE(relu(), EpilogueOp::Relu)
FUSEKIT_NODE(gelu_tanh(), EpilogueOp::GeluTanh)
FUSEKIT_NODE(gelu_erf(), EpilogueOp::GeluErf)
FUSEKIT_NODE(silu(), EpilogueOp::Silu)
FUSEKIT_NODE(swiglu(std::int64_t block), EpilogueOp::SwiGlu, static_cast<float>(block))
FUSEKIT_NODE(geglu(std::int64_t block), EpilogueOp::GeGlu, static_cast<float>(block))
FUSEKIT_NODE(clamp(float lo, float hi), EpilogueOp::Clamp, lo, hi)
FUSEKIT_NODE(cast(DType dtype), EpilogueOp::Cast, 0.0f, 0.0f, dtype)
FUSEKIT_NODE(quantize_e4m3(), EpilogueOp::QuantizeE4M3)
FUSEKIT_NODE(store_aux(), EpilogueOp::StoreAux)
#undef FUSEKIT_NODE

std::string EpilogueSpec::to_string() const {
  if (nodes.empty()) return "identity";
  std::string out;
  for (const auto& n : nodes) {
    if (!out.empty()) out += " → ";
    out += epilogue_op_name(n.op);
    switch (n.op) {
      case EpilogueOp::Scale:
      case EpilogueOp::AddSource: out += fmt::format("({})", n.p0); break;
      case EpilogueOp::Clamp: out += fmt::format("({}, {})", n.p0, n.p1); break;
      case EpilogueOp::SwiGlu:
      case EpilogueOp::GeGlu: out += fmt::format("(block {})", static_cast<std::int64_t>(n.p0)); break;
      case EpilogueOp::Cast: out += fmt::format("({})", dtype_name(n.dtype)); break;
      default: break;
    }
  }
  return out;
}

std::uint64_t EpilogueSpec::hash() const {
  std::uint64_t h = kFnvOffset;
  for (const auto& n : nodes) {
    const auto op = static_cast<std::uint8_t>(n.op);
    const auto dt = static_cast<std::uint8_t>(n.dtype);
    h = fnv1a(h, &op, sizeof op);
    h = fnv1a(h, &n.p0, sizeof n.p0);
    h = fnv1a(h, &n.p1, sizeof n.p1);
    h = fnv1a(h, &dt, sizeof dt);
  }
  return h;
}

bool EpilogueSpec::uses(EpilogueOp op) const {
  return std::any_of(nodes.begin(), nodes.end(), [op](const EpilogueNode& n) { return n.op == op; });
}

bool EpilogueSpec::gated() const {
  return std::any_of(nodes.begin(), nodes.end(), [](const EpilogueNode& n) { return is_gate(n.op); });
}

std::int64_t EpilogueSpec::gate_block() const {
  for (const auto& n : nodes)
    if (is_gate(n.op)) return static_cast<std::int64_t>(n.p0);
  return 0;
}

bool EpilogueSpec::uniform() const {
  return std::none_of(nodes.begin(), nodes.end(), [](const EpilogueNode& n) { return position_dependent(n.op); });
}

std::int64_t epilogue_output_columns(const EpilogueSpec& spec, std::int64_t n) { return spec.gated() ? n / 2 : n; }

void validate(const EpilogueSpec& spec, const EpilogueTensors& t, std::int64_t m, std::int64_t n) {
  require(m >= 0 && n >= 0, "M, N", "both >= 0", fmt::format("{}, {}", m, n));
  int gates = 0, aux_stores = 0;
  std::int64_t cols = n;  // columns at the current point of the chain
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const auto& node = spec.nodes[i];
    require(node.op <= EpilogueOp::StoreAux, fmt::format("epilogue node {} op", i), "an EpilogueOp",
            static_cast<int>(node.op));
    const std::string where = fmt::format("epilogue node {} ({})", i, epilogue_op_name(node.op));
    switch (node.op) {
      case EpilogueOp::AddSource:
        check::structure("epilogue source", t.source);
        check::shape("epilogue source", t.source, {m, cols});
        break;
      case EpilogueOp::ColumnBias:
        check::structure("epilogue bias", t.bias);
        check::shape("epilogue bias", t.bias, {cols});
        break;
      case EpilogueOp::RowScale:
        check::structure("epilogue row_scale", t.row_scale);
        check::shape("epilogue row_scale", t.row_scale, {m});
        check::dtype("epilogue row_scale", t.row_scale, {DType::F32});
        break;
      case EpilogueOp::ColumnScale:
        check::structure("epilogue col_scale", t.col_scale);
        check::shape("epilogue col_scale", t.col_scale, {cols});
        check::dtype("epilogue col_scale", t.col_scale, {DType::F32});
        break;
      case EpilogueOp::Residual:
        check::structure("epilogue residual", t.residual);
        check::shape("epilogue residual", t.residual, {m, cols});
        break;
      case EpilogueOp::SwiGlu:
      case EpilogueOp::GeGlu: {
        ++gates;
        const auto block = static_cast<std::int64_t>(node.p0);
        require(block > 0 && static_cast<float>(block) == node.p0, where + " block", "a positive integer", node.p0);
        require(cols % (2 * block) == 0, where + " block", fmt::format("2·block dividing N = {}", cols), block);
        cols /= 2;
        break;
      }
      case EpilogueOp::Clamp:
        require(node.p0 <= node.p1, where, "lo <= hi", fmt::format("lo {} > hi {}", node.p0, node.p1));
        break;
      case EpilogueOp::Cast:
        require(is_float(node.dtype), where + " dtype", "a float dtype", dtype_name(node.dtype));
        break;
      case EpilogueOp::QuantizeE4M3:
        require(i + 1 == spec.nodes.size(), where, "the last node of the chain", fmt::format("node {} of {}", i, spec.nodes.size()));
        require(t.quant_scale != nullptr, "epilogue quant_scale", "a device pointer to one float", "null");
        // Both are read (amax: atomically max-ed) as whole floats.
        for (auto [name, ptr] : {std::pair<const char*, const void*>{"epilogue quant_scale", t.quant_scale},
                                 {"epilogue amax", t.amax}}) {
          const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
          require(addr % sizeof(float) == 0, fmt::format("{} address", name), "a multiple of 4 bytes",
                  fmt::format("{:#x}", addr));
        }
        break;
      case EpilogueOp::StoreAux:
        ++aux_stores;
        check::structure("epilogue aux", t.aux);
        check::shape("epilogue aux", t.aux, {m, cols});
        break;
      default: break;
    }
  }
  require(gates <= 1, "epilogue", "at most one gated node (swiglu/geglu)", gates);
  require(aux_stores <= 1, "epilogue", "at most one store_aux node", aux_stores);
  // The chain's own outputs share no byte with its inputs or each other: other tiles' threads
  // still read those while these are written.
  const TensorView quant_scale = check::scalar_view(t.quant_scale), amax = check::scalar_view(t.amax);
  for (const auto& [arg, out] : {check::NamedView{"epilogue aux", &t.aux}, check::NamedView{"epilogue amax", &amax}})
    check::disjoint_from_each(arg, *out,
                              {{"epilogue source", &t.source}, {"epilogue bias", &t.bias},
                               {"epilogue row_scale", &t.row_scale}, {"epilogue col_scale", &t.col_scale},
                               {"epilogue residual", &t.residual}, {"epilogue quant_scale", &quant_scale}});
  check::disjoint("epilogue aux", t.aux, "epilogue amax", amax, check::InPlace::Forbidden);
}

void validate_disjoint(const EpilogueTensors& t, std::string_view out_arg, const TensorView& out,
                       std::initializer_list<check::NamedView> operands) {
  const TensorView quant_scale = check::scalar_view(t.quant_scale), amax = check::scalar_view(t.amax);
  check::disjoint_from_each(out_arg, out,
                            {{"epilogue bias", &t.bias}, {"epilogue row_scale", &t.row_scale},
                             {"epilogue col_scale", &t.col_scale}, {"epilogue quant_scale", &quant_scale},
                             {"epilogue amax", &amax}});
  check::disjoint("epilogue aux", t.aux, out_arg, out, check::InPlace::Forbidden);
  for (const auto& [arg, chain_out] :
       {check::NamedView{"epilogue aux", &t.aux}, check::NamedView{"epilogue amax", &amax}})
    check::disjoint_from_each(arg, *chain_out, operands);
}

}  // namespace fusekit
