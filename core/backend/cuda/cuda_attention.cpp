// CudaBackend's fused causal attention (Backend::attention_forward / attention_backward) over
// kernels/attention.cu: shape and format checks here, the flash-style kernels there (tensor cores
// for bf16 / fp16 / tf32 / 3xTF32, an fp32 SIMT path for the rest; see attention.cuh). The
// backward's scratch (the row dots D [B, H, T]) comes from the backend's allocator as Workspace,
// so the ledger counts it.
#include <string>

#include "attention.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_checks.h"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

namespace {
std::string dims(int64_t B, int64_t T, int64_t H) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H);
}

// qkv [B*T, 3D] with D divisible by H; returns hd.
int64_t check_qkv(const char* op, const Tensor& qkv, int64_t B, int64_t T, int64_t H) {
  if (B < 1 || T < 1 || H < 1 || qkv.rank() != 2 || qkv.dim(0) != B * T || qkv.dim(1) % 3 != 0 ||
      (qkv.dim(1) / 3) % H != 0 || qkv.dim(1) == 0)
    throw Error(std::string(op) + ": qkv must be [B*T, 3*D] with D divisible by H, got " + shape_str(qkv.shape()) +
                " for " + dims(B, T, H));
  if (!dtype_is_float(qkv.dtype())) throw Error(std::string(op) + ": qkv must be a float tensor");
  return qkv.dim(1) / 3 / H;
}

void check_rows(const char* op, const char* what, const Tensor& t, int64_t n) {
  if (t.numel() != n || !dtype_is_float(t.dtype()))
    throw Error(std::string(op) + ": " + what + " must be a float tensor of " + std::to_string(n) +
                " elements, got " + shape_str(t.shape()) + " " + dtype_name(t.dtype()));
}

void check_lse(const char* op, const Tensor& lse, int64_t n) {
  if (lse.dtype() != DType::F32 || lse.numel() != n)
    throw Error(std::string(op) + ": lse must be fp32 [B, H, T] (" + std::to_string(n) + " elements), got " +
                shape_str(lse.shape()) + " " + dtype_name(lse.dtype()));
}
}  // namespace

void CudaBackend::attention_forward(const Tensor& qkv, int64_t B, int64_t T, int64_t H, Tensor& y, Tensor& lse,
                                    MatmulMode mode) {
  bind();
  const int64_t hd = check_qkv("attention_forward", qkv, B, T, H), d = hd * H;
  check_rows("attention_forward", "y", y, B * T * d);
  check_lse("attention_forward", lse, B * H * T);
  TL_TIMED_COST("attention_forward", attention_cost(qkv, B, T, H, false));
  launch_attention_forward(qkv.raw(), dcode(qkv.dtype()), y.raw(), dcode(y.dtype()), lse.data<float>(), B, T, H, hd,
                           mode == MatmulMode::Tf32, m_options.attention_wgmma, m_ctx.stream);
}

void CudaBackend::attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, int64_t B,
                                     int64_t T, int64_t H, Tensor& dqkv, MatmulMode mode) {
  bind();
  const int64_t hd = check_qkv("attention_backward", qkv, B, T, H), d = hd * H;
  check_rows("attention_backward", "y", y, B * T * d);
  check_rows("attention_backward", "dy", dy, B * T * d);
  check_rows("attention_backward", "dqkv", dqkv, qkv.numel());
  check_lse("attention_backward", lse, B * H * T);
  TL_TIMED_COST("attention_backward", attention_cost(qkv, B, T, H, true));
  const bool tf32 = mode == MatmulMode::Tf32;
  Tensor scratch = empty({attention_backward_scratch_floats(B, T, H, hd, dcode(qkv.dtype()), dcode(dy.dtype()), tf32)},
                         DType::F32, MemCategory::Workspace);
  launch_attention_backward(qkv.raw(), dcode(qkv.dtype()), y.raw(), dcode(y.dtype()), dy.raw(), dcode(dy.dtype()),
                            lse.data<float>(), scratch.data<float>(), dqkv.raw(), dcode(dqkv.dtype()), B, T, H, hd,
                            tf32, m_options.attention_wgmma, m_ctx.stream);
}

}  // namespace trainlab::cuda
