// Fp8Gemm: the fp8 matrix products of a linear layer through cuBLASLt (sm_89 and later).
//   forward   y  = act(x w^T + b):  x, w cast to e4m3;  cuBLASLt TN product, bf16 out, with the
//             RELU_BIAS / BIAS epilogue;
//   backward  g  = dy * relu'(y) cast to e5m2 (and its transpose);  dx = g w  (w^T cast to e4m3);
//             dW (+)= g^T x (x^T cast to e4m3 in the forward pass);  dbias from the bf16 g.
// Each cast tensor has its own scale from a 16-step history of maxima (kernels/fp8.cuh); the
// products get the inverse scales as device pointers, so a captured step stays valid.
// Shapes must be multiples of 16 and activations ReLU/none; otherwise (the 10-class output layer
// of the digits MLP, for one) forward()/backward() return false and the layer runs in bf16.
// Emulated products: on a GPU without fp8 units (units = false), or for a product cuBLASLt refuses,
// the same fp8 codes are decoded to fp32 with the inverse scales folded into one operand and
// multiplied by the fp32 tiled GEMM (no tf32): the same format effects as the fp8 units and as
// the CPU backend (cpu_fp8.cpp), to fp32 rounding, at fp32 speed.
#pragma once
#include <map>
#include <string>

#include "backend/backend.h"

namespace trainlab::cuda {

class CudaBackend;

class Fp8Gemm {
 public:
  Fp8Gemm(CudaBackend& be, bool units);
  ~Fp8Gemm();
  bool forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y, Tensor* pre);
  bool backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved, Tensor& dw,
                Tensor* dbias, Tensor* dx, bool accumulate);

 private:
  struct Layer {
    Tensor xq, xtq, wq, wtq, gq, gtq;  // fp8 casts
    Tensor hist;                        // fp32 [3, 16]: x, w, g histories
    Tensor inv;                         // fp32 [3 x kInvStride]: their inverse scales
    // cuBLASLt answers NOT_SUPPORTED (every algorithm) for a scale pointer that is not 16-byte
    // aligned: each inverse scale gets its own 256 bytes.
    static constexpr int64_t kInvStride = 64;
    float* inv_scale(int i) { return inv.data<float>() + i * kInvStride; }
    Tensor ea, eb, eg;                  // fp32 [m, k], [n, k], [m, n]: emulated products' operands
    std::weak_ptr<Storage> owner;       // the weight it was made for (backend/per_weight.h)
  };
  Layer& layer(const Tensor& w, int64_t m, int64_t k, int64_t n);
  // D[col-major rows x cols] = alpha * A^T B (+ beta C): cuBLASLt's fp8 TN product.
  // Returns false (nothing written) when cuBLASLt has no algorithm for it; the caller falls back.
  bool matmul_tn(const Tensor& a, const float* a_inv, const Tensor& b, const float* b_inv, int64_t rows, int64_t cols,
                 int64_t kdim, Tensor& d, float beta, const Tensor* bias, bool relu, const char* what);
  // The emulated products (see above): y = act(x w^T + b); dW (+)= g^T x; dx = g w.
  void emulate_forward(Layer& L, const Tensor* bias, Activation act, Tensor& y);
  void emulate_dw(Layer& L, Tensor& dw, bool accumulate);
  void emulate_dx(Layer& L, Tensor& dx);
  Tensor& operand(Tensor& t, int64_t rows, int64_t cols);
  CudaBackend& m_be;
  bool m_units = false;      // fp8 tensor cores (sm_89+): cuBLASLt is tried first
  void* m_handle = nullptr;  // cublasLtHandle_t
  Tensor m_workspace;
  std::map<const void*, Layer> m_layers;
  std::map<std::string, bool> m_refused;  // products cuBLASLt refused (said once on stderr)
};

}  // namespace trainlab::cuda
