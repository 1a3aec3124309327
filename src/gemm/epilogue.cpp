// Names and operand roles of the cuBLASLt epilogues, shared by the backend, references and CLI.
#include <cctype>
#include <string>

#include "fusekit/error.hpp"
#include "fusekit/gemm.hpp"

namespace fusekit {

namespace {
// NOTE: cuBLASLt packs the ReLU mask one bit per element with leading dimensions in multiples
// of 128 bits, i.e. 16 bytes.
constexpr std::int64_t kReluMaskRowBits = 128;
constexpr std::int64_t kBitsPerByte = 8;
}  // namespace

std::string_view epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::Default: return "DEFAULT";
    case Epilogue::Relu: return "RELU";
    case Epilogue::ReluAux: return "RELU_AUX";
    case Epilogue::Bias: return "BIAS";
    case Epilogue::ReluBias: return "RELU_BIAS";
    case Epilogue::ReluAuxBias: return "RELU_AUX_BIAS";
    case Epilogue::DRelu: return "DRELU";
    case Epilogue::DReluBGrad: return "DRELU_BGRAD";
    case Epilogue::Gelu: return "GELU";
    case Epilogue::GeluAux: return "GELU_AUX";
    case Epilogue::GeluBias: return "GELU_BIAS";
    case Epilogue::GeluAuxBias: return "GELU_AUX_BIAS";
    case Epilogue::DGelu: return "DGELU";
    case Epilogue::DGeluBGrad: return "DGELU_BGRAD";
    case Epilogue::BGradA: return "BGRADA";
    case Epilogue::BGradB: return "BGRADB";
  }
  return "?";
}

Epilogue parse_epilogue(std::string_view name) {
  std::string upper(name);
  for (auto& ch : upper) ch = static_cast<char>(ch == '-' ? '_' : std::toupper(ch));
  for (auto e : kAllEpilogues)
    if (epilogue_name(e) == upper) return e;
  throw_invalid("epilogue", "a cuBLASLt epilogue name such as GELU_BIAS", std::string(name));
}

BiasRole bias_role(Epilogue e) {
  switch (e) {
    case Epilogue::Bias:
    case Epilogue::ReluBias:
    case Epilogue::ReluAuxBias:
    case Epilogue::GeluBias:
    case Epilogue::GeluAuxBias: return BiasRole::Input;
    case Epilogue::DReluBGrad:
    case Epilogue::DGeluBGrad:
    case Epilogue::BGradA:
    case Epilogue::BGradB: return BiasRole::GradOutput;
    default: return BiasRole::None;
  }
}

AuxRole aux_role(Epilogue e) {
  switch (e) {
    case Epilogue::ReluAux:
    case Epilogue::ReluAuxBias: return AuxRole::ReluMaskOutput;
    case Epilogue::DRelu:
    case Epilogue::DReluBGrad: return AuxRole::ReluMaskInput;
    case Epilogue::GeluAux:
    case Epilogue::GeluAuxBias: return AuxRole::PreactOutput;
    case Epilogue::DGelu:
    case Epilogue::DGeluBGrad: return AuxRole::PreactInput;
    default: return AuxRole::None;
  }
}

std::int64_t bias_length(Epilogue e, std::int64_t m, std::int64_t n) {
  if (bias_role(e) == BiasRole::None) return 0;
  return e == Epilogue::BGradA ? m : n;
}

std::int64_t relu_mask_row_bytes(std::int64_t n) {
  return (n + kReluMaskRowBits - 1) / kReluMaskRowBits * (kReluMaskRowBits / kBitsPerByte);
}

}  // namespace fusekit
