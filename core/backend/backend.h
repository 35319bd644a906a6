// Backend: the table of operations a device offers the training loop (ggml-style). CpuBackend is
// the reference; every other backend must match it within each operation's stated tolerance
// (tests/gpu/ checks that, operation by operation).
//
// Conventions for every operation:
//  * tensors are row-major and contiguous; matrices are [rows, cols];
//  * floating-point inputs may be fp32, bf16 or fp16 (and fp8 where `supports` says so); every
//    operation converts its inputs to fp32, computes and accumulates in fp32, and rounds its result
//    to the output tensor's format (round to nearest even);
//  * operations are asynchronous on devices that can be: results are valid on the host after
//    download() or synchronize().
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "config/device_options.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace trainlab {

class TokenDecoder;
struct DecodeWeights;
struct DecodeSpec;
class DeviceCollectives;

enum class Activation : uint8_t { None, ReLU, GELU };
const char* activation_name(Activation a);

// How a matrix product treats its floating-point inputs: Native computes with the inputs' own
// values (fp32 exactly, 16-bit formats as stored); Tf32 rounds fp32 inputs to tf32 (10-bit
// mantissa) first, as tensor cores do; Fp8 casts the inputs to fp8 (e4m3 forward, e5m2 gradients)
// with per-tensor delayed scaling. The precision policy (train/precision.h) picks it per run; it
// is an argument of every product, never a flag the backend keeps.
enum class MatmulMode : uint8_t { Native, Tf32, Fp8 };
const char* matmul_mode_name(MatmulMode m);

// Every operation of the table, for Backend::supports(Op, DType): what a backend can do is asked,
// never inferred from an exception's text. The DType asked about is the format of the operation's
// floating-point tensors (its inputs and results; gather_rows: the rows copied, any format), except:
// QuantizeI8 and Int8Linear take the format of their float side (x, y); GemmI8 is asked with I8;
// Decode with the decoder's weight format (F32, BF16, I8 or I4: DecodeSpec::format); AdamW and Sgd
// with the compute copy's format (master weights and moments are always fp32); Lion, AdamW8bit
// and Adafactor (optional) likewise.
enum class Op : uint8_t {
  Gemm, LinearForward, LinearForwardResidual, LinearBackward, Activation, SoftmaxXent, GatherRows,
  EmbeddingForward, EmbeddingBackward, LayerNormForward, LayerNormBackward, AttentionForward,
  AttentionBackward, Dropout, Add, FakeQuantize, QuantizeI8, GemmI8, Int8Linear, DistillBackward,
  Decode, AdamW, Sgd, Lion, AdamW8bit, Adafactor
};
const char* op_name(Op op);

struct DeviceInfo {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;
  std::string name;                 // "CPU (2 threads, OpenBLAS)" or "NVIDIA H200"
  std::string software;             // what its speed also depends on: "CUDA driver 13.0, runtime 13.0", the BLAS
  int64_t total_bytes = 0;          // device memory (0 when unknown, e.g. host RAM)
  int64_t used_bytes = 0;           // device-wide used memory (cudaMemGetInfo), all processes
  int64_t runtime_context_bytes = 0;// the runtime's own context, shown apart from the lab's tensors
  std::vector<DType> formats;       // number formats the device computes in
  // Datasheet dense peaks in TFLOP/s (for MFU), one per operand format and matrix-product mode
  // (fp32 products at Native and at Tf32 differ 7x on an H100); empty where unknown (the CPU).
  struct Peak {
    DType dtype;
    MatmulMode mode;
    double tflops;
  };
  std::vector<Peak> peak_tflops;
  // The peak of products on `dtype` operands in `mode`, 0 when unknown. A mode that does not apply
  // to the format (Tf32 on bf16 operands, Fp8 where the device has no fp8 units) falls back to the
  // format's Native peak, which is what such products run at.
  double peak_for(DType dtype, MatmulMode mode) const;
  std::string id() const;           // "cpu", "cuda:0"
};

// The datasheet dense peaks (TFLOP/s) of an NVIDIA GPU of compute capability `cc` (major * 10 +
// minor): 90 (H100/H200 SXM), 80 (A100 SXM); empty for others. The CUDA backend's DeviceInfo and
// the planner's GPUs (plan/planner.h) both read this one table.
std::vector<DeviceInfo::Peak> datasheet_peaks(int cc);

// Values that change from step to step. Backends keep them in device memory so that a captured
// step (CUDA graph) reads the current values on every replay.
struct StepScalars {
  float lr = 0.0f;
  float loss_scale = 1.0f;  // the loss gradient is multiplied by this (fp16 dynamic loss scaling)
  float grad_unscale = 1.0f;// the optimizer multiplies gradients by this (1 / loss_scale)
  float step = 1.0f;        // optimizer step count t, from 1 (Adam's bias correction)
};

struct AdamWHyper {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};
struct SgdHyper {
  float momentum = 0.9f, weight_decay = 0.0f;
  bool nesterov = false;
};
struct LionHyper {
  float beta1 = 0.9f, beta2 = 0.99f, weight_decay = 0.0f;
};
// Adafactor (Shazeer and Stern 2018) with the constants of their paper and of Hugging Face's
// implementation: eps1 regularises g^2, eps2 floors RMS(w) in the relative step size, updates are
// clipped to RMS <= clip, the second moment decays with beta2_t = 1 - t^-decay_rate.
struct AdafactorHyper {
  float beta1 = 0.0f;  // 0: no first moment
  float weight_decay = 0.0f;
  float eps1 = 1e-30f, eps2 = 1e-3f, clip = 1.0f, decay_rate = 0.8f;
  bool relative_step = false;  // lr_t = min(1e-2, 1/sqrt(t)) * max(eps2, RMS(w)) instead of lr
};

// One parameter as the optimizer sees it. `master` is fp32 and receives the update; `value` is the
// compute copy (the same tensor as master in fp32 runs), rewritten from master in the same pass.
// `mask` (optional, same shape, fp32 0/1) keeps pruned weights at exactly zero.
struct ParamSlot {
  Tensor* master = nullptr;
  Tensor* value = nullptr;
  Tensor* grad = nullptr;
  Tensor* m = nullptr;  // AdamW first moment / SGD momentum buffer (fp32)
  Tensor* v = nullptr;  // AdamW second moment (fp32)
  const Tensor* mask = nullptr;
  bool decay = true;
};

// 8-bit AdamW's state of one parameter (bitsandbytes' block-wise dynamic quantization): the
// parameter's elements in blocks of `block` from its first element; per block one fp32 absmax each
// for m and v and one 8-bit code a value (an index into tensor/dynamic_map.h's signed map for m,
// the unsigned map for v). Codes are I8 tensors of numel() bytes (read as unsigned), absmax fp32
// of ceil(numel / block) values; an absmax of 0 means the whole block is zero.
struct Quant8State {
  Tensor* m_code = nullptr;
  Tensor* v_code = nullptr;
  Tensor* m_absmax = nullptr;
  Tensor* v_absmax = nullptr;
};
// Adafactor's state of one parameter: factored (rows > 0) a fp32 row average of r values and a
// column average of c values for a [r, c] matrix; else `v` (fp32, numel); `m` when beta1 > 0.
struct FactoredState {
  int64_t rows = 0, cols = 0;  // rows = 0: not factored
  Tensor* row = nullptr;
  Tensor* col = nullptr;
  Tensor* v = nullptr;
  Tensor* m = nullptr;
};

// Per-kernel device time, for the "where does a step's time go" view and the roofline: the work
// and traffic of the timed calls (backend/op_cost.h's formulas, summed like ms; 0 where unknown).
struct KernelTime {
  std::string name;
  double ms = 0.0;
  int64_t calls = 0;
  double flops = 0.0;
  double bytes = 0.0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceInfo info() const = 0;
  // Whether the device stores and computes in format t.
  virtual bool supports(DType t) const = 0;
  // Whether operation `op` runs on tensors of format t here (see Op for which format is asked).
  // Callers ask before calling an optional operation; one that is not supported throws
  // "<op> is not supported on <device>". The base answers for the mandatory operations (the pure
  // virtual ones: supports(t)) and false for every optional one; a backend that implements an
  // optional operation says so in its override.
  virtual bool supports(Op op, DType t) const;
  MemoryLedger& ledger() { return m_ledger; }

  // --- memory -------------------------------------------------------------------------------
  virtual Tensor empty(const Shape& shape, DType dtype, MemCategory category) = 0;
  // Host -> tensor. `src` holds numel() values of type src_type; they are converted (RNE) to the
  // tensor's format.
  virtual void upload(Tensor& dst, const void* src, DType src_type) = 0;
  // Tensor -> host, converted to dst_type.
  virtual void download(const Tensor& src, void* dst, DType dst_type) = 0;
  // dst = src (same element count), converted to dst's format.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, float value) = 0;
  virtual void synchronize() {}

  // --- host memory and transfers (optimizer offload, optim/offload.h) --------------------------
  // A tensor in host memory that the host reads and writes through raw() and that transfers to and
  // from this device fast (pinned memory on a GPU, counted in this backend's ledger; on the CPU an
  // ordinary tensor: host memory is the device's). upload/download/copy accept it as either side.
  virtual Tensor empty_host(const Shape& shape, DType dtype, MemCategory category) {
    return empty(shape, dtype, category);
  }
  // Byte copies of equal-sized tensors of one format between this device and empty_host memory,
  // queued after the work queued so far on a transfer stream of their own (the CPU copies at once).
  // copy_to_host_async returns a ticket; wait_transfer(ticket) blocks the host until that copy has
  // landed. copy_from_host_async reads `src` when its turn on the transfer stream comes: the host
  // must not write it again before join_transfers. join_transfers makes the device's later work
  // wait for every transfer queued so far (without blocking the host) and retires the tickets.
  virtual int copy_to_host_async(const Tensor& src, Tensor& dst) {
    copy(src, dst);
    return 0;
  }
  virtual void wait_transfer(int ticket) {}
  virtual void copy_from_host_async(const Tensor& src, Tensor& dst) { copy(src, dst); }
  virtual void join_transfers() {}

  // --- per-step state -----------------------------------------------------------------------
  // Backends keep the last values (step_scalars()) for work the host does on the device's behalf
  // (an offloaded optimizer step runs on the CPU with the device's scalars).
  virtual void set_step_scalars(const StepScalars& s) = 0;
  const StepScalars& step_scalars() const { return m_scalars; }

  // --- operations ----------------------------------------------------------------------------
  // Every matrix product (gemm, the linear_* operations, the two attention products) takes the
  // MatmulMode it computes in as its last argument:
  //   Native  inputs as stored, fp32 accumulation;
  //   Tf32    fp32 inputs rounded to tf32 (10-bit mantissa, ties to even) first; 16-bit inputs as
  //           Native (they already have fewer bits);
  //   Fp8     linear_* products of fp8_linear_eligible layers: inputs cast to fp8 (e4m3 forward, e5m2
  //           gradients) with per-tensor delayed scales (tensor/fp8_scaling.h; tensors stay bf16, the
  //           scales' state kept per weight by the backend): on fp8 units, emulated exactly on the CPU
  //           (cpu_fp8.cpp); a GPU without fp8 units and every other product compute Native (bf16).
  // A captured step (run_step) replays the modes it was captured with: whoever changes the mode of
  // a captured step calls invalidate_captures() (the trainer does after every mid-run change).
  // C[M,N] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T.
  virtual void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
                    float beta, MatmulMode mode) = 0;
  // y[M,N] = act(x[M,K] * w[N,K]^T + bias[N]). When `pre` is given it receives the
  // pre-activation (GELU's backward needs it; ReLU's uses y).
  virtual void linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y,
                              Tensor* pre, MatmulMode mode) = 0;
  // y[M,N] = x[M,K] * w[N,K]^T + bias[N] + residual[M,N], rounded once to y's format: a linear
  // layer whose output joins a residual stream, the add fused into the product's epilogue (the
  // transformer's attention and MLP projections). residual has y's shape and may alias y.
  virtual void linear_forward_residual(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& residual,
                                       Tensor& y, MatmulMode mode) {
    throw_not_supported(Op::LinearForwardResidual);
  }
  // Backward of linear_forward. `dy` is the gradient w.r.t. y; the backend may use it as scratch
  // (its contents are undefined afterwards). The gradient w.r.t. the pre-activation is rounded to
  // dy's format before the products, as a device that stores it would. `saved` is y for ReLU, pre
  // for GELU, unused for None.
  //   dw (=|+=) dy^T x;  dbias (=|+=) column sums of dy;  dx = dy w (skipped when dx is null).
  virtual void linear_backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved,
                               Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate, MatmulMode mode) = 0;
  virtual void activation_forward(Activation act, const Tensor& x, Tensor& y) = 0;
  // dx = dy * act'(x), given the input x and the output y.
  virtual void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                                   Tensor& dx) = 0;
  // Fused softmax + cross-entropy over logits [B, C] with int32 labels [B]; softmax in fp32.
  //   stats (fp32 [2]) (=|+=) {sum of per-row losses, number of rows whose argmax is the label}
  //   dlogits = (softmax - onehot) * grad_multiplier * loss_scale   (when dlogits is given)
  virtual void softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_multiplier,
                            Tensor& stats, bool accumulate_stats) = 0;
  // dst[i, :] = src[idx[i], :] for int32 idx; src and dst of any one format.
  virtual void gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) = 0;

  // --- transformer operations (issue 4). Optional: defaults throw "<op> is not supported on
  // <device>", so a backend that lacks one still builds; CpuBackend implements all of them.
  // out[i, :] = tok[idx[i], :] + pos[i % T, :] for int32 idx [B*T] (B*T rows, T = positions used).
  virtual void embedding_forward(const Tensor& tok, const Tensor& pos, const Tensor& idx, int64_t T, Tensor& out) {
    throw_not_supported(Op::EmbeddingForward);
  }
  // dtok (=|+=) scatter-add of dout rows by idx; dpos[t] (=|+=) sum over b of dout[b*T + t]
  // (rows of dpos past T untouched when accumulating, zeroed otherwise). fp32 accumulation in
  // row order, so the result is deterministic.
  virtual void embedding_backward(const Tensor& dout, const Tensor& idx, int64_t T, Tensor& dtok, Tensor& dpos,
                                  bool accumulate) {
    throw_not_supported(Op::EmbeddingBackward);
  }
  // y = (x - mean) * rstd * gamma + beta per row of x [N, D]; mean, rstd (fp32 [N]) are saved for
  // backward. var is the biased variance (as PyTorch), rstd = 1/sqrt(var + eps), all in fp32.
  virtual void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                                 Tensor& mean, Tensor& rstd) {
    throw_not_supported(Op::LayerNormForward);
  }
  // dx (=|+= when accumulate_dx: the residual add fused) = rstd * (g - mean(g) - xhat * mean(g*xhat)),
  // g = dy * gamma; dgamma (=|+=) sum_rows dy*xhat; dbeta (=|+=) sum_rows dy (accumulate_params).
  // dx_sums (optional, =|+= as the parameters): the column sums of dx as stored (rounded to dx's
  // format) -- the bias gradient of the linear layer whose output is the residual stream x, taken
  // while dx is in registers instead of by a pass of its own (see linear_backward's dbias).
  virtual void layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool accumulate_dx,
                                  bool accumulate_params, Tensor* dx_sums = nullptr) {
    throw_not_supported(Op::LayerNormBackward);
  }
  // Causal multi-head attention over a fused projection qkv [B*T, 3D] (per row: q | k | v, head h
  // in columns h*D/H .. (h+1)*D/H of each): y [B*T, D] = softmax(q k^T / sqrt(D/H), causal) v per
  // (batch, head). lse (fp32 [B, H, T]) receives each row's log-sum-exp of the scaled scores so
  // that backward can rebuild the probabilities without a stored T x T matrix. The products q k^T
  // and p v round their fp32 inputs to tf32 in Tf32 mode; Fp8 computes them as Native (attention
  // has no fp8 path: its inputs stay bf16).
  virtual void attention_forward(const Tensor& qkv, int64_t B, int64_t T, int64_t H, Tensor& y, Tensor& lse,
                                 MatmulMode mode) {
    throw_not_supported(Op::AttentionForward);
  }
  // dqkv [B*T, 3D] (overwritten) from dy [B*T, D], the forward's qkv, y and lse; the mode as forward.
  virtual void attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, int64_t B,
                                  int64_t T, int64_t H, Tensor& dqkv, MatmulMode mode) {
    throw_not_supported(Op::AttentionBackward);
  }
  // Inverted dropout: y[i] = keep(i) ? x[i] / (1 - p) : 0, keep(i) iff dropout_hash(seed, i) >=
  // dropout_threshold(p) (backend/dropout_hash.h), i the row-major element index. The mask is a
  // function of the seed alone, so the backward is the same call on dy with the same seed, and a
  // recomputed forward redraws the same mask. The scale 1/(1-p) is applied in fp32 and rounded
  // once to y's format. y may alias x.
  // `first` is the element index of x's first element in the tensor the mask is drawn for: a
  // rank that holds rows [r, r + n) of a sequence-parallel activation draws that tensor's mask for
  // them with first = r * row width (the same mask as the unsplit run's).
  virtual void dropout(const Tensor& x, float p, uint64_t seed, Tensor& y, uint64_t first = 0) {
    throw_not_supported(Op::Dropout);
  }
  // out = a + b (same element count; out may alias a or b).
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) { throw_not_supported(Op::Add); }
  // y = GELU(x) = x * Phi(x) (erf form, as F.gelu) and its backward dx = dy * GELU'(x), for a
  // GELU kept apart from its matrix product (the transformer's MLP). Defaults: activation_*.
  virtual void gelu_forward(const Tensor& x, Tensor& y) { activation_forward(Activation::GELU, x, y); }
  virtual void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
    activation_backward(Activation::GELU, x, x, dy, dx);
  }

  // --- compression operations (issue 5). Optional: defaults throw "<op> is not supported on
  // <device>" so a backend without them still builds; CpuBackend implements all of them.
  // Symmetric fake quantization (quantize then dequantize) of w into out (any float formats):
  // elements are taken in groups of `group` consecutive values in row-major order (group = numel:
  // per tensor; group = columns: per output channel; else per group inside a row), per group
  //   s = fp16(max|w| / qmax), qmax = 2^(bits-1) - 1;  out = s * clamp(rne(w / s), -qmax, qmax)
  // (s = 0 gives 0). The scale is rounded to fp16 because that is how it is stored.
  virtual void fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) {
    throw_not_supported(Op::FakeQuantize);
  }
  // q (int8) = clamp(rne(x / scale), -127, 127) for float x.
  virtual void quantize_i8(const Tensor& x, float scale, Tensor& q) { throw_not_supported(Op::QuantizeI8); }
  // c (int32 [M, N]) = a (int8 [M, K]) * b (int8 [N, K])^T, exact int32 accumulation.
  virtual void gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) { throw_not_supported(Op::GemmI8); }
  // W8A8 linear layer: y [M, N] = act((xq wq^T)_int32 * (x_scale * w_scales[n]) + bias[n]), the
  // integer product accumulated exactly in int32 and rescaled once. xq int8 [M, K], wq int8
  // [N, K], w_scales fp32 [N] (or [1] for one scale), bias fp32 [N] or null.
  virtual void int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales,
                           const Tensor* bias, Activation act, Tensor& y) {
    throw_not_supported(Op::Int8Linear);
  }
  // Knowledge distillation on top of softmax_xent's gradient, per row of the student logits zs
  // and teacher logits zt [B, C]:
  //   dlogits = (1 - alpha) * dlogits + alpha * T * (softmax(zs / T) - softmax(zt / T)) * grad_multiplier * loss_scale,
  // the gradient of alpha * T^2 * KL(p_t^T || p_s^T) + (1 - alpha) * CE. When kl_sum (fp32 [1]) is
  // given it receives (=|+= with accumulate) the sum over rows of T^2 * KL.
  virtual void distill_backward(const Tensor& student_logits, const Tensor& teacher_logits, float temperature,
                                float alpha, float grad_multiplier, Tensor& dlogits, Tensor* kl_sum, bool accumulate) {
    throw_not_supported(Op::DistillBackward);
  }

  // --- token decoding (backend/token_decoder.h) -----------------------------------------------
  // A decoder that keeps a decoder-only transformer's weights on this device in spec's format and
  // runs one token at a time (decode/decoder.h's make_decoder is the entry point; the CPU's
  // decoder lives in decode/). Default: throws "Decode is not supported on <device>"
  // (supports(Op::Decode, format) asks first).
  virtual std::unique_ptr<TokenDecoder> create_decoder(const DecodeWeights& weights, const DecodeSpec& spec);

  // --- optimizers (multi-tensor: one call updates every parameter) ---------------------------
  // PyTorch's AdamW, in its order of operations:
  //   g = grad * grad_unscale; master *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //   master -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps); master *= mask;
  //   value = round(master) in value's format (same pass).
  virtual void adamw_step(std::span<ParamSlot> params, const AdamWHyper& h) = 0;
  // g = grad * grad_unscale + wd * master; buf = momentum * buf + g; master -= lr * (nesterov ? g + momentum*buf : buf).
  virtual void sgd_step(std::span<ParamSlot> params, const SgdHyper& h) = 0;
  // Lion (Chen et al. 2023), one moment m in slot.m (fp32 or bf16, stored RNE):
  //   g = grad * grad_unscale; c = b1 m + (1-b1) g; master = master (1 - lr wd) - lr sign(c);
  //   m = b2 m + (1-b2) g; master *= mask; value = round(master). sign(0) = 0.
  // Optional (supports(Op::Lion, format)); the base throws naming the device.
  virtual void lion_step(std::span<ParamSlot> params, const LionHyper& h);
  // 8-bit AdamW (bitsandbytes' blockwise Adam): per block, m and v are dequantized (code * absmax),
  // updated in fp32 as adamw_step does (the weight from the fp32 m and v), then each block's new
  // absmax = max |m| (max v) and every value is stored as the code nearest to value / absmax (ties
  // to the lower code). state[i] belongs to params[i]; slot.m and slot.v are not used.
  virtual void adamw8bit_step(std::span<ParamSlot> params, std::span<const Quant8State> state, const AdamWHyper& h,
                              int block);
  // Adafactor, per parameter with g = grad * grad_unscale, u = g^2 + eps1, b = 1 - t^-decay_rate:
  //   factored [r, c]: row = b row + (1-b) mean_j u; col = b col + (1-b) mean_i u;
  //                    U = g / sqrt(row_i / mean(row) * col_j);  else v = b v + (1-b) u; U = g / sqrt(v)
  //   U /= max(1, RMS(U) / clip); with beta1: m = b1 m + (1-b1) U, U = m
  //   a = relative_step ? min(1e-2, 1/sqrt(t)) * max(eps2, RMS(master)) : lr
  //   master = master (1 - a wd) - a U; master *= mask; value = round(master).
  virtual void adafactor_step(std::span<ParamSlot> params, std::span<const FactoredState> state,
                              const AdafactorHyper& h);
  // True when every element of every tensor is finite.
  virtual bool all_finite(std::span<const Tensor* const> tensors) = 0;
  // The sum of the squares of every element of every tensor, accumulated in double (gradient
  // clipping's norm). The base downloads each tensor as fp32 and sums on the host, which every
  // backend can; a device reduction may replace it.
  virtual double sum_squares(std::span<const Tensor* const> tensors);

  // --- collectives among devices (backend/collectives.h; core/dist is the caller) -------------
  // Whether this backend's devices can form collective groups (the CUDA module built with NCCL).
  virtual bool supports_collectives() const { return false; }
  // Opaque bytes that name a new group (NCCL's unique id): one rank makes them and sends them to
  // the others, which pass them to create_collectives. Default: throws "collectives are not supported".
  virtual std::vector<uint8_t> new_collectives_id();
  // This process's member (`rank` of `size`) of the group named by `id`; blocks until every rank
  // has joined. Default: throws as new_collectives_id.
  virtual std::unique_ptr<DeviceCollectives> create_collectives(const std::vector<uint8_t>& id, int rank, int size);

  // --- step capture --------------------------------------------------------------------------
  // Runs `step`. Backends that can (CUDA graphs) run it eagerly the first time for `key` (so that
  // its buffers get allocated), capture it on the second call and replay the capture afterwards;
  // the step must then be static: same shapes and buffers on each call, with everything that
  // changes from step to step read from device memory (StepScalars, uploaded batch indices).
  virtual void run_step(const std::string& key, const std::function<void()>& step) { step(); }
  // Forget every capture (shapes, precision or buffers changed).
  virtual void invalidate_captures() {}
  virtual void set_capture_enabled(bool on) { m_capture = on; }
  bool capture_enabled() const { return m_capture; }

  // Per-kernel timing (empty where the backend does not time kernels).
  virtual void set_kernel_timing(bool on) { m_kernel_timing = on; }
  virtual std::vector<KernelTime> kernel_times() const { return {}; }
  virtual void reset_kernel_times() {}

 protected:
  // The error of an optional operation this backend does not have (callers ask supports() first).
  [[noreturn]] void throw_not_supported(Op op) const {
    throw Error(std::string(op_name(op)) + " is not supported on " + info().name);
  }
  MemoryLedger m_ledger;
  StepScalars m_scalars;  // the last set_step_scalars
  bool m_capture = true;
  bool m_kernel_timing = false;
};

// Creates a backend from a device string: "cpu", "cuda", "cuda:N" or "auto" (the GPU when one
// works, else the CPU; `notice` then receives a one-line explanation). Throws Error with the
// reason when the named device cannot be used. `options` (the config's device.* keys:
// device_options(config)) reach the CUDA module and its kernels as arguments; the CPU has none of
// those choices. The CPU backend's thread count is the deployment setting TRAINLAB_THREADS (unset
// or 0: OpenBLAS's own choice), and the CUDA module is looked for in TRAINLAB_CUDA_MODULE first.
std::unique_ptr<Backend> create_backend(const std::string& device, const DeviceOptions& options,
                                        std::string* notice = nullptr);
// The same with every device.* key at its default (probes, tests, tools without a run config).
std::unique_ptr<Backend> create_backend(const std::string& device, std::string* notice = nullptr);
// Devices usable on this machine, e.g. {"cpu", "cuda:0"}.
std::vector<std::string> available_devices();
// Whether this build includes the CUDA backend.
bool built_with_cuda();

}  // namespace trainlab
