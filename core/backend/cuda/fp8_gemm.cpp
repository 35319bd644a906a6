#include "backend/cuda/fp8_gemm.h"

#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "backend/per_weight.h"
#include "fp8.cuh"
#include "elementwise.cuh"
#include "gemm.cuh"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

#define TL_CUBLAS_CHECK(expr)                                                                          \
  do {                                                                                                 \
    cublasStatus_t tl_st_ = (expr);                                                                    \
    if (tl_st_ != CUBLAS_STATUS_SUCCESS)                                                               \
      throw Error(std::string("cuBLASLt error ") + cublasLtGetStatusName(tl_st_) + " in " #expr " at " + \
                  __FILE__ + ":" + std::to_string(__LINE__));                                          \
  } while (0)

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;
cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F8E4M3: return CUDA_R_8F_E4M3;
    case DType::F8E5M2: return CUDA_R_8F_E5M2;
    default: throw Error("fp8 product: unsupported format");
  }
}
}  // namespace

// TRAINLAB_FP8_EMULATE=1 takes the emulated products on fp8 units too (the parity test checks both).
Fp8Gemm::Fp8Gemm(CudaBackend& be, bool units) : m_be(be) {
  const char* emulate = std::getenv("TRAINLAB_FP8_EMULATE");
  m_units = units && !(emulate && std::string(emulate) == "1");
}

Fp8Gemm::~Fp8Gemm() {
  if (m_handle) cublasLtDestroy(static_cast<cublasLtHandle_t>(m_handle));
}

Fp8Gemm::Layer& Fp8Gemm::layer(const Tensor& w, int64_t m, int64_t k, int64_t n) {
  if (!m_handle && m_units) {
    cublasLtHandle_t h;
    TL_CUBLAS_CHECK(cublasLtCreate(&h));
    m_handle = h;
    m_workspace = m_be.empty({static_cast<int64_t>(kWorkspaceBytes)}, DType::I8, MemCategory::Workspace);
  }
  Layer& L = per_weight_state(m_layers, w);
  auto ensure = [&](Tensor& t, Shape s, DType dt, MemCategory c) {
    if (!t.defined() || t.shape() != s || t.dtype() != dt) {
      t = Tensor();
      t = m_be.empty(s, dt, c);
    }
  };
  ensure(L.xq, {m, k}, DType::F8E4M3, MemCategory::Activations);
  ensure(L.xtq, {k, m}, DType::F8E4M3, MemCategory::Activations);
  ensure(L.wq, {n, k}, DType::F8E4M3, MemCategory::Weights);
  ensure(L.wtq, {k, n}, DType::F8E4M3, MemCategory::Weights);
  ensure(L.gq, {m, n}, DType::F8E5M2, MemCategory::Gradients);
  ensure(L.gtq, {n, m}, DType::F8E5M2, MemCategory::Gradients);
  if (!L.hist.defined()) {
    L.hist = m_be.empty({3, kFp8History}, DType::F32, MemCategory::Workspace);
    m_be.fill(L.hist, 0.0f);
    L.inv = m_be.empty({3 * Layer::kInvStride}, DType::F32, MemCategory::Workspace);
    m_be.fill(L.inv, 1.0f);
  }
  return L;
}

bool Fp8Gemm::matmul_tn(const Tensor& a, const float* a_inv, const Tensor& b, const float* b_inv, int64_t rows,
                        int64_t cols, int64_t kdim, Tensor& d, float beta, const Tensor* bias, bool relu,
                        const char* what) {
  const std::string key = std::string(what) + " " + std::to_string(rows) + "x" + std::to_string(cols) + "x" +
                          std::to_string(kdim) + (bias ? " bias" : "") + (relu ? " relu" : "");
  if (!m_units || m_refused.count(key)) return false;
  auto refuse = [&](const char* why) {
    m_refused[key] = true;
    std::fprintf(stderr, "trainlab: cuBLASLt fp8 product %s: %s; falling back\n", key.c_str(), why);
    return false;
  };
  auto h = static_cast<cublasLtHandle_t>(m_handle);
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Cleanup {
    cublasLtMatmulDesc_t& op;
    cublasLtMatrixLayout_t &la, &lb, &lc;
    cublasLtMatmulPreference_t& pref;
    ~Cleanup() {
      if (pref) cublasLtMatmulPreferenceDestroy(pref);
      if (lc) cublasLtMatrixLayoutDestroy(lc);
      if (lb) cublasLtMatrixLayoutDestroy(lb);
      if (la) cublasLtMatrixLayoutDestroy(la);
      if (op) cublasLtMatmulDescDestroy(op);
    }
  } cleanup{op, la, lb, lc, pref};
  TL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
  TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA)));
  TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB)));
  TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_inv, sizeof(a_inv)));
  TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_inv, sizeof(b_inv)));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (bias) {
    epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    const void* bp = bias->raw();
    TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
    const cudaDataType_t bt = cuda_type(bias->dtype());
    TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  } else if (relu) {
    epi = CUBLASLT_EPILOGUE_RELU;
  }
  TL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  // A is stored [rows, kdim] row-major = col-major [kdim, rows] (op T); B [cols, kdim] row-major =
  // col-major [kdim, cols] (op N); D col-major [rows, cols] = row-major [cols, rows].
  TL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, cuda_type(a.dtype()), kdim, rows, kdim));
  TL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, cuda_type(b.dtype()), kdim, cols, kdim));
  TL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, cuda_type(d.dtype()), rows, cols, rows));
  TL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  TL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // Some algorithms the heuristic offers are refused at run time for fp8 inputs: try them in turn.
  cublasLtMatmulHeuristicResult_t heur[8] = {};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, heur, &found);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) return refuse(hs != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusName(hs) : "no algorithm");
  const float alpha = 1.0f;
  cublasStatus_t ms = CUBLAS_STATUS_NOT_SUPPORTED;
  for (int i = 0; i < found && ms == CUBLAS_STATUS_NOT_SUPPORTED; ++i)
    ms = cublasLtMatmul(h, op, &alpha, a.raw(), la, b.raw(), lb, &beta, d.raw(), lc, d.raw(), lc, &heur[i].algo,
                        m_workspace.raw(), ws, m_be.m_ctx.stream);
  if (ms == CUBLAS_STATUS_NOT_SUPPORTED) return refuse("CUBLAS_STATUS_NOT_SUPPORTED by every offered algorithm");
  TL_CUBLAS_CHECK(ms);
  return true;
}

bool Fp8Gemm::forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y, Tensor* pre) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (!fp8_linear_eligible(m, k, n, act == Activation::GELU, pre != nullptr)) return false;
  if (y.dtype() != DType::BF16 || (bias && bias->dtype() != DType::BF16)) return false;
  Layer& L = layer(w, m, k, n);
  float* hist = L.hist.data<float>();
  cudaStream_t s = m_be.m_ctx.stream;
  launch_cast_fp8(x.raw(), dcode(x.dtype()), nullptr, m, k, L.xq.raw(), L.xtq.raw(), dcode(DType::F8E4M3), hist,
                  L.inv_scale(0), m_be.m_ctx.scalars, s);
  launch_cast_fp8(w.raw(), dcode(w.dtype()), nullptr, n, k, L.wq.raw(), L.wtq.raw(), dcode(DType::F8E4M3),
                  hist + kFp8History, L.inv_scale(1), m_be.m_ctx.scalars, s);
  // y^T [n, m] (col-major) = wq [n, k] . xq^T
  if (matmul_tn(L.wq, L.inv_scale(1), L.xq, L.inv_scale(0), n, m, k, y, 0.0f, bias, act == Activation::ReLU,
                "forward"))
    return true;
  // Epilogue refused: the plain fp8 product, then bias and activation in one small pass.
  if (matmul_tn(L.wq, L.inv_scale(1), L.xq, L.inv_scale(0), n, m, k, y, 0.0f, nullptr, false, "forward")) {
    launch_bias_act(y.raw(), dcode(y.dtype()), bias ? bias->raw() : nullptr, bias ? dcode(bias->dtype()) : 0, m, n,
                    act == Activation::ReLU ? 1 : 0, s);
    return true;
  }
  emulate_forward(L, bias, act, y);
  return true;
}

bool Fp8Gemm::backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved, Tensor& dw,
                       Tensor* dbias, Tensor* dx, bool accumulate) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  Layer* found = per_weight_find(m_layers, w);
  if (!found || act == Activation::GELU) return false;  // forward ran in bf16
  if (dy.dtype() != DType::BF16 || dw.dtype() != DType::BF16 || (dx && dx->dtype() != DType::BF16)) return false;
  Layer& L = *found;
  float* hist = L.hist.data<float>();
  cudaStream_t s = m_be.m_ctx.stream;
  const void* mask = act == Activation::ReLU ? saved->raw() : nullptr;
  launch_cast_fp8(dy.raw(), dcode(dy.dtype()), mask, m, n, L.gq.raw(), L.gtq.raw(), dcode(DType::F8E5M2),
                  hist + 2 * kFp8History, L.inv_scale(2), m_be.m_ctx.scalars, s);
  if (dbias) {  // dbias (+)= column sums of the bf16 g, through the tiled kernel's ones column
    GemmProblem p;
    p.a = dy.raw(), p.sam = 1, p.sak = n;
    p.m = static_cast<int>(n), p.n = 0, p.k = static_cast<int>(m);
    p.b = dy.raw();
    p.ones_col = true;
    p.bias_grad = dbias->raw();
    p.bias_grad_dt = dcode(dbias->dtype());
    p.beta = accumulate ? 1.0f : 0.0f;
    if (mask) p.a_mask = mask, p.a_mask_act = 1;
    launch_gemm(dcode(dy.dtype()), &p, 1, s);
  }
  // dW^T [k, n] (col-major) = xtq [k, m] . gtq [n, m]^T
  if (!matmul_tn(L.xtq, L.inv_scale(0), L.gtq, L.inv_scale(2), k, n, m, dw, accumulate ? 1.0f : 0.0f, nullptr, false,
                 "dW"))
    emulate_dw(L, dw, accumulate);
  // dx^T [k, m] (col-major) = wtq [k, n] . gq [m, n]^T
  if (dx && !matmul_tn(L.wtq, L.inv_scale(1), L.gq, L.inv_scale(2), k, m, n, *dx, 0.0f, nullptr, false, "dx"))
    emulate_dx(L, *dx);
  return true;
}

// --- emulated products: fp8 codes decoded to fp32 (exact), one operand carrying both inverse
// scales, the fp32 tiled GEMM (no tf32), one rounding into the bf16 output -------------------------
Tensor& Fp8Gemm::operand(Tensor& t, int64_t rows, int64_t cols) {
  if (!t.defined() || t.dim(0) != rows || t.dim(1) != cols) {
    t = Tensor();
    t = m_be.empty({rows, cols}, DType::F32, MemCategory::Workspace);
  }
  return t;
}

void Fp8Gemm::emulate_forward(Layer& L, const Tensor* bias, Activation act, Tensor& y) {
  const int64_t m = L.xq.dim(0), k = L.xq.dim(1), n = L.wq.dim(0);
  cudaStream_t s = m_be.m_ctx.stream;
  Tensor& xd = operand(L.ea, m, k);
  Tensor& wd = operand(L.eb, n, k);
  launch_dequant_fp8(L.xq.raw(), dcode(DType::F8E4M3), m * k, nullptr, nullptr, xd.data<float>(), s);
  launch_dequant_fp8(L.wq.raw(), dcode(DType::F8E4M3), n * k, L.inv_scale(0), L.inv_scale(1), wd.data<float>(), s);
  GemmProblem p;  // y[m, n] = act(x w^T / (sx sw) + b)
  p.a = xd.raw(), p.sam = k, p.sak = 1;
  p.b = wd.raw(), p.sbk = 1, p.sbn = k;
  p.c = y.raw(), p.ldc = n, p.c_dt = dcode(y.dtype());
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  if (bias) p.bias = bias->raw(), p.bias_dt = dcode(bias->dtype());
  p.act = act == Activation::ReLU ? 1 : 0;
  launch_gemm(dcode(DType::F32), &p, 1, s);
}

void Fp8Gemm::emulate_dw(Layer& L, Tensor& dw, bool accumulate) {
  const int64_t m = L.xq.dim(0), k = L.xq.dim(1), n = L.wq.dim(0);
  cudaStream_t s = m_be.m_ctx.stream;
  Tensor& gd = operand(L.eg, m, n);
  Tensor& xd = operand(L.ea, m, k);
  launch_dequant_fp8(L.gq.raw(), dcode(DType::F8E5M2), m * n, nullptr, nullptr, gd.data<float>(), s);
  launch_dequant_fp8(L.xq.raw(), dcode(DType::F8E4M3), m * k, L.inv_scale(0), L.inv_scale(2), xd.data<float>(), s);
  GemmProblem p;  // dW[n, k] (+)= g^T x / (sg sx)
  p.a = gd.raw(), p.sam = 1, p.sak = n;
  p.b = xd.raw(), p.sbk = k, p.sbn = 1;
  p.c = dw.raw(), p.ldc = k, p.c_dt = dcode(dw.dtype());
  p.m = static_cast<int>(n), p.n = static_cast<int>(k), p.k = static_cast<int>(m);
  p.beta = accumulate ? 1.0f : 0.0f;
  launch_gemm(dcode(DType::F32), &p, 1, s);
}

void Fp8Gemm::emulate_dx(Layer& L, Tensor& dx) {
  const int64_t m = L.xq.dim(0), k = L.xq.dim(1), n = L.wq.dim(0);
  cudaStream_t s = m_be.m_ctx.stream;
  Tensor& gd = operand(L.eg, m, n);  // decoded by emulate_dw when it ran; cheap to repeat
  Tensor& wd = operand(L.eb, n, k);
  launch_dequant_fp8(L.gq.raw(), dcode(DType::F8E5M2), m * n, nullptr, nullptr, gd.data<float>(), s);
  launch_dequant_fp8(L.wq.raw(), dcode(DType::F8E4M3), n * k, L.inv_scale(1), L.inv_scale(2), wd.data<float>(), s);
  GemmProblem p;  // dx[m, k] = g w / (sg sw)
  p.a = gd.raw(), p.sam = n, p.sak = 1;
  p.b = wd.raw(), p.sbk = k, p.sbn = 1;
  p.c = dx.raw(), p.ldc = k, p.c_dt = dcode(dx.dtype());
  p.m = static_cast<int>(m), p.n = static_cast<int>(k), p.k = static_cast<int>(n);
  launch_gemm(dcode(DType::F32), &p, 1, s);
}

}  // namespace trainlab::cuda
