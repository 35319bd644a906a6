// The parts of backend.h that belong to no one backend: names of the enums, the device's peak
// lookup, the datasheet peaks, the base answer of supports(Op, DType) and of the device collectives.
#include "backend/backend.h"

#include "backend/collectives.h"

namespace trainlab {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::ReLU: return "relu";
    case Activation::GELU: return "gelu";
  }
  return "?";
}

const char* matmul_mode_name(MatmulMode m) {
  switch (m) {
    case MatmulMode::Native: return "native";
    case MatmulMode::Tf32: return "tf32";
    case MatmulMode::Fp8: return "fp8";
  }
  return "?";
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Gemm: return "gemm";
    case Op::LinearForward: return "linear_forward";
    case Op::LinearForwardResidual: return "linear_forward_residual";
    case Op::LinearBackward: return "linear_backward";
    case Op::Activation: return "activation";
    case Op::SoftmaxXent: return "softmax_xent";
    case Op::GatherRows: return "gather_rows";
    case Op::EmbeddingForward: return "embedding_forward";
    case Op::EmbeddingBackward: return "embedding_backward";
    case Op::LayerNormForward: return "layernorm_forward";
    case Op::LayerNormBackward: return "layernorm_backward";
    case Op::AttentionForward: return "attention_forward";
    case Op::AttentionBackward: return "attention_backward";
    case Op::Dropout: return "dropout";
    case Op::Add: return "add";
    case Op::FakeQuantize: return "fake_quantize";
    case Op::QuantizeI8: return "quantize_i8";
    case Op::GemmI8: return "gemm_i8";
    case Op::Int8Linear: return "int8_linear";
    case Op::DistillBackward: return "distill_backward";
    case Op::Decode: return "token decoding";
    case Op::AdamW: return "adamw_step";
    case Op::Sgd: return "sgd_step";
    case Op::Lion: return "lion_step";
    case Op::AdamW8bit: return "adamw8bit_step";
    case Op::Adafactor: return "adafactor_step";
  }
  return "?";
}

std::string DeviceInfo::id() const { return kind == DeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

double DeviceInfo::peak_for(DType dtype, MatmulMode mode) const {
  double native = 0.0;
  for (const Peak& p : peak_tflops) {
    if (p.dtype != dtype) continue;
    if (p.mode == mode) return p.tflops;
    if (p.mode == MatmulMode::Native) native = p.tflops;
  }
  return native;
}

std::vector<DeviceInfo::Peak> datasheet_peaks(int cc) {
  // fp32 products on the CUDA cores (Native) and on the tensor cores (Tf32) apart.
  using M = MatmulMode;
  if (cc == 90)
    return {{DType::F32, M::Native, 66.9}, {DType::F32, M::Tf32, 494.7}, {DType::BF16, M::Native, 989.4},
            {DType::F16, M::Native, 989.4}, {DType::F8E4M3, M::Fp8, 1978.9}, {DType::F8E5M2, M::Fp8, 1978.9}};
  if (cc == 80)
    return {{DType::F32, M::Native, 19.5}, {DType::F32, M::Tf32, 156.0}, {DType::BF16, M::Native, 312.0},
            {DType::F16, M::Native, 312.0}};
  return {};
}

bool Backend::supports(Op op, DType t) const {
  switch (op) {
    // The pure virtual operations: every backend has them for the formats it computes in.
    case Op::Gemm:
    case Op::LinearForward:
    case Op::LinearBackward:
    case Op::Activation:
    case Op::SoftmaxXent:
    case Op::AdamW:
    case Op::Sgd: return dtype_is_float(t) && supports(t);
    case Op::GatherRows: return supports(t);
    default: return false;  // optional: only where the backend's override says so
  }
}

}  // namespace trainlab

namespace trainlab {

double Backend::sum_squares(std::span<const Tensor* const> tensors) {
  double sum = 0.0;
  std::vector<float> host;
  for (const Tensor* t : tensors) {
    host.resize(static_cast<size_t>(t->numel()));
    if (host.empty()) continue;
    download(*t, host.data(), DType::F32);
    for (float v : host) sum += static_cast<double>(v) * static_cast<double>(v);
  }
  return sum;
}

void Backend::lion_step(std::span<ParamSlot>, const LionHyper&) {
  throw Error(std::string(op_name(Op::Lion)) + " is not supported on " + info().name);
}
void Backend::adamw8bit_step(std::span<ParamSlot>, std::span<const Quant8State>, const AdamWHyper&, int) {
  throw Error(std::string(op_name(Op::AdamW8bit)) + " is not supported on " + info().name);
}
void Backend::adafactor_step(std::span<ParamSlot>, std::span<const FactoredState>, const AdafactorHyper&) {
  throw Error(std::string(op_name(Op::Adafactor)) + " is not supported on " + info().name);
}

// Backends without device collectives (the CPU: its ranks use MPI on host memory, in core/dist).
std::vector<uint8_t> Backend::new_collectives_id() {
  throw Error("collectives among devices are not supported on " + info().name +
              " (a CUDA build with NCCL has them)");
}

std::unique_ptr<DeviceCollectives> Backend::create_collectives(const std::vector<uint8_t>&, int, int) {
  throw Error("collectives among devices are not supported on " + info().name +
              " (a CUDA build with NCCL has them)");
}

}  // namespace trainlab
