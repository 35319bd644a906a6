// Fp8Gemm: the fp8 matrix products of a linear layer through cuBLASLt (sm_89 and later).
//   forward   y  = act(x w^T + b):  x, w cast to e4m3;  cuBLASLt TN product, bf16 out, with the
//             RELU_BIAS / BIAS epilogue;
//   backward  g  = dy * relu'(y) cast to e5m2 (and its transpose);  dx = g w  (w^T cast to e4m3);
//             dW (+)= g^T x (x^T cast to e4m3 in the forward pass);  dbias from the bf16 g.
// Each cast tensor has its own scale from a 16-step history of maxima (kernels/fp8.cuh); the
// products get the inverse scales as device pointers, so a captured step stays valid.
// Shapes must be multiples of 16 and activations ReLU/none; otherwise (the 10-class output layer
// of the digits MLP, for one) forward()/backward() return false and the layer runs in bf16.
#pragma once
#include <map>
#include <string>

#include "backend/backend.h"

namespace trainlab::cuda {

class CudaBackend;

class Fp8Gemm {
 public:
  explicit Fp8Gemm(CudaBackend& be);
  ~Fp8Gemm();
  bool forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y, Tensor* pre);
  bool backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved, Tensor& dw,
                Tensor* dbias, Tensor* dx, bool accumulate);

 private:
  struct Layer {
    Tensor xq, xtq, wq, wtq, gq, gtq;  // fp8 casts
    Tensor hist;                        // fp32 [3, 16]: x, w, g histories
    Tensor inv;                         // fp32 [3]: their inverse scales
  };
  Layer& layer(const Tensor& w, int64_t m, int64_t k, int64_t n);
  // D[col-major rows x cols] = alpha * A^T B (+ beta C): cuBLASLt's fp8 TN product.
  // Returns false (nothing written) when cuBLASLt has no algorithm for it; the caller falls back.
  bool matmul_tn(const Tensor& a, const float* a_inv, const Tensor& b, const float* b_inv, int64_t rows, int64_t cols,
                 int64_t kdim, Tensor& d, float beta, const Tensor* bias, bool relu, const char* what);
  CudaBackend& m_be;
  void* m_handle = nullptr;  // cublasLtHandle_t
  Tensor m_workspace;
  std::map<const void*, Layer> m_layers;
  std::map<std::string, bool> m_refused;  // products cuBLASLt refused (said once on stderr)
};

}  // namespace trainlab::cuda
