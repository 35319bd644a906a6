// CpuBackend: the reference implementation of every operation. Matrix products go through
// OpenBLAS's cblas_sgemm (fp32 accumulate); everything else is plain loops in fp32. Tensors in
// 16-bit formats are converted to fp32 in workspace buffers (counted in the ledger as workspace)
// and results are rounded back to the output's format (round to nearest even).
#pragma once
#include <array>
#include <functional>
#include <map>
#include <utility>

#include "backend/backend.h"
#include "backend/host_timing.h"
#include "backend/cpu_panels.h"
#include "tensor/fp8_scaling.h"

namespace trainlab {

class CpuBackend final : public Backend {
 public:
  // threads: OpenBLAS threads (0 = OpenBLAS's own choice).
  explicit CpuBackend(int threads = 0);

  DeviceInfo info() const override;
  bool supports(DType t) const override;
  // Every operation of the table but token decoding (the CPU's decoder is CharGptGenerator, made
  // by make_decoder without the backend), for every float format; gather_rows for any format.
  bool supports(Op op, DType t) const override;

  Tensor empty(const Shape& shape, DType dtype, MemCategory category) override;
  void upload(Tensor& dst, const void* src, DType src_type) override;
  void download(const Tensor& src, void* dst, DType dst_type) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;

  void set_step_scalars(const StepScalars& s) override { m_scalars = s; }

  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
            float beta, MatmulMode mode) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y,
                      Tensor* pre, MatmulMode mode) override;
  void linear_forward_residual(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& residual,
                               Tensor& y, MatmulMode mode) override;
  void linear_backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved,
                       Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate, MatmulMode mode) override;
  void activation_forward(Activation act, const Tensor& x, Tensor& y) override;
  void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor& dx) override;
  void softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_multiplier,
                    Tensor& stats, bool accumulate_stats) override;
  void gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override;

  // Compression operations (issue 5); defined in cpu_compress_ops.cpp.
  void fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) override;
  void quantize_i8(const Tensor& x, float scale, Tensor& q) override;
  void gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) override;
  void int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales, const Tensor* bias,
                   Activation act, Tensor& y) override;
  void distill_backward(const Tensor& student_logits, const Tensor& teacher_logits, float temperature, float alpha,
                        float grad_multiplier, Tensor& dlogits, Tensor* kl_sum, bool accumulate) override;

  // Transformer operations: cpu_transformer_ops.cpp.
  void embedding_forward(const Tensor& tok, const Tensor& pos, const Tensor& idx, int64_t T, Tensor& out) override;
  void embedding_backward(const Tensor& dout, const Tensor& idx, int64_t T, Tensor& dtok, Tensor& dpos,
                          bool accumulate) override;
  void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                         Tensor& rstd) override;
  void layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd, const Tensor& dy,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool accumulate_dx, bool accumulate_params,
                          Tensor* dx_sums = nullptr) override;
  void attention_forward(const Tensor& qkv, int64_t B, int64_t T, int64_t H, Tensor& y, Tensor& lse,
                         MatmulMode mode) override;
  void attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, int64_t B, int64_t T,
                          int64_t H, Tensor& dqkv, MatmulMode mode) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void dropout(const Tensor& x, float p, uint64_t seed, Tensor& y, uint64_t first = 0) override;
  void gelu_forward(const Tensor& x, Tensor& y) override;
  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) override;

  void adamw_step(std::span<ParamSlot> params, const AdamWHyper& h) override;
  void sgd_step(std::span<ParamSlot> params, const SgdHyper& h) override;
  // cpu_optim.cpp, cpu_adafactor.cpp
  void lion_step(std::span<ParamSlot> params, const LionHyper& h) override;
  void adamw8bit_step(std::span<ParamSlot> params, std::span<const Quant8State> state, const AdamWHyper& h,
                      int block) override;
  void adafactor_step(std::span<ParamSlot> params, std::span<const FactoredState> state,
                      const AdafactorHyper& h) override;
  bool all_finite(std::span<const Tensor* const> tensors) override;

  // Kernel timing on the host clock (host_timing.h): each outermost operation's time.
  std::vector<KernelTime> kernel_times() const override { return m_times.sorted(); }
  void reset_kernel_times() override { m_times.clear(); }

 private:
  // fp32 views of tensors: the tensor's own memory when it is fp32 (and no tf32 rounding is
  // asked for), else a converted copy in workspace slot `slot`.
  const float* read_f32(const Tensor& t, int slot, bool tf32_round = false);
  // Where to compute an output in fp32: the tensor itself when fp32, else workspace slot `slot`;
  // when `load` is set the current contents are converted in first (for beta != 0).
  float* write_f32(Tensor& t, int slot, bool load);
  // Rounds the fp32 result back into t when t is not fp32.
  void finish_write(Tensor& t, const float* computed);
  float* slot_buffer(int slot, size_t n);
  // The threads the backend's own loops use: its OpenBLAS threads (cpu_backend.cpp).
  int worker_threads() const;
  // out = fn(x[, y]) elementwise (fn(x, y, out, n) on fp32 values; y may be null, and may be out),
  // in any float formats, split among the threads (cpu_transformer_ops.cpp).
  using ElementwiseFn = std::function<void(const float*, const float*, float*, size_t)>;
  void elementwise(const Tensor& x, const Tensor* y, Tensor& out, const ElementwiseFn& fn);
  // linear_forward with an optional residual added before the one rounding (the two public forms).
  void linear_forward_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y, Tensor* pre,
                           const Tensor* residual, MatmulMode mode);
  // dbias (=|+=) the column sums of g [rows, dbias.numel()] as stored, rows in order in fp32 (slots
  // 0 and 5): a linear layer's bias gradient, wherever it is taken (linear_backward, or fused into
  // gelu_backward / layernorm_backward), so the sums are bit-identical wherever they are taken.
  void bias_grad_sums(const Tensor& g, Tensor& dbias, bool accumulate);

  // MatmulMode::Fp8 (cpu_fp8.cpp): a linear layer's products with fp8 operands, cast with the
  // delayed scaling of tensor/fp8_scaling.h, whose state is kept per weight as the CUDA backend
  // keeps it: the three histories (input, weight, gradient) and the scales of the last casts.
  // seen: the largest |x| (fp32 bits) the casts of this step have loaded so far (Fp8Cast::amax_bits).
  struct Fp8LayerState {
    float history[3][kFp8History] = {};
    float scale[3] = {1.0f, 1.0f, 1.0f};
    uint32_t seen[3] = {0, 0, 0};
    std::weak_ptr<Storage> owner;  // the weight it was made for (backend/per_weight.h)
  };
  // The casts of a product's operands a and b, and alpha = the product of their inverse scales;
  // inactive when the layer computes in bf16 (where the CUDA backend does: fp8_linear_eligible,
  // bf16 tensors). record_a / record_b: the history (0-2) that records the maximum of a / b once
  // the product has loaded it (fp8_record), or -1.
  struct Fp8Product {
    bool active = false;
    cpu::Fp8Cast a, b;
    float alpha = 1.0f;
    Fp8LayerState* layer = nullptr;
    int record_a = -1, record_b = -1;
  };
  // After the product of p: records the maxima of its operands a and b (as loaded by the casts;
  // the exact tiled maximum of fp8_tiled_amax when a value was infinite) in the layer's histories.
  void fp8_record(const Fp8Product& p, const Tensor& a, const Tensor& b);
  // y = x w^T: casts x and w (e4m3), recording their maxima.
  Fp8Product fp8_forward_product(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, const Tensor& y,
                                 const Tensor* pre);
  // dw = g^T x and dx = g w: casts g (e5m2, recording its maximum); x and w with the forward's scales.
  std::pair<Fp8Product, Fp8Product> fp8_backward_products(const Tensor& x, const Tensor& w, const Tensor& g,
                                                          Activation act, const Tensor& dw, const Tensor* dx);

  static constexpr int kSlots = 12;  // 0-5: the MLP ops, 6-11: the transformer ops (cpu_transformer_ops.cpp)
  std::array<Tensor, kSlots> m_workspace;
  std::map<const void*, Fp8LayerState> m_fp8_layers;
  int m_threads;
  HostKernelTimes m_times;
};

}  // namespace trainlab
