// CudaBackend: every Backend operation on one NVIDIA GPU, over the kernels in kernels/ (fused
// matrix products with bias/activation epilogues, fused softmax + cross-entropy, multi-tensor
// optimizers) and cuBLASLt (fp8 products with per-tensor delayed scaling, large products).
//
// Everything the backend owns lives in its CudaContext: the stream all work is queued on, the
// cuBLASLt handle and workspace, the caching allocator behind Backend::empty, pinned staging
// buffers for host->device copies, the device-side StepScalars, captured step graphs and the
// timing events. There are no globals: two backends on two devices are independent.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/op_cost.h"
#include "backend/cuda/device_allocator.h"
#include "common.cuh"
#include "elementwise.cuh"

namespace trainlab::cuda {

class Fp8Gemm;
class LtGemm;
class NcclCollectives;

// Per-kernel timing with CUDA events: begin()/end() around each launch while timing is on.
struct PendingTiming {
  std::string name;
  cudaEvent_t start, stop;
  OpCost cost;
};

struct CudaContext {
  int device = 0;
  cudaDeviceProp props{};
  cudaStream_t stream = nullptr;
  std::shared_ptr<DeviceAllocator> alloc;
  kern::DevScalars* scalars = nullptr;   // device
  int* flag = nullptr;                    // device int for all_finite
  int* flag_host = nullptr;               // pinned
  // Pinned staging ring for small host->device copies (indices, step scalars).
  static constexpr int kSlots = 64;
  static constexpr size_t kSlotBytes = 64 << 10;
  char* pinned = nullptr;
  std::array<cudaEvent_t, kSlots> slot_done{};
  int next_slot = 0;
  int64_t context_bytes = 0;  // device memory in use right after the runtime context was created
  struct Graph {
    int calls = 0;
    cudaGraph_t graph = nullptr;            // kept for its node handles
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t scalar_node = nullptr;  // the gather that also writes the step scalars
    bool eager = false;  // the step draws per-call host values (dropout seeds): never captured
  };
  kern::DevScalars host_scalars{0.0f, 1.0f, 1.0f, 1.0f};
  bool scalars_dirty = false;  // host_scalars not yet written to the device
  // During a capture: whether a kernel already read the scalars / a gather already writes them.
  bool capture_scalars_read = false, capture_scalars_written = false;
  std::map<std::string, Graph> graphs;
  bool capturing = false;
  // Set during a capture by an operation whose per-call host values a replay would freeze
  // (dropout's seed): run_step drops the capture and runs that step eagerly from then on.
  bool capture_refused = false;
  // Set by those operations whenever they run: a step that used one in its first (eager) run is
  // never captured, so no step runs twice on the host.
  bool host_values_drawn = false;
  std::vector<cudaEvent_t> free_events;
  // Host <-> device transfers (Backend::copy_to_host_async...): their own stream, so that copies
  // of one part overlap the host's work on another; one event per ticket, reused after a join.
  cudaStream_t xfer = nullptr;
  std::vector<cudaEvent_t> xfer_events;
  int xfer_used = 0;
  std::vector<PendingTiming> pending;
  std::map<std::string, KernelTime> times;
};

class CudaBackend final : public Backend {
 public:
  // `options`: the config's device.* keys (fp32 product math, cuBLASLt autotuning, wgmma attention).
  CudaBackend(int device, const DeviceOptions& options);
  ~CudaBackend() override;

  DeviceInfo info() const override;
  bool supports(DType t) const override;
  bool supports(Op op, DType t) const override;

  Tensor empty(const Shape& shape, DType dtype, MemCategory category) override;
  void upload(Tensor& dst, const void* src, DType src_type) override;
  void download(const Tensor& src, void* dst, DType dst_type) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, float value) override;
  void synchronize() override;
  Tensor empty_host(const Shape& shape, DType dtype, MemCategory category) override;
  int copy_to_host_async(const Tensor& src, Tensor& dst) override;
  void wait_transfer(int ticket) override;
  void copy_from_host_async(const Tensor& src, Tensor& dst) override;
  void join_transfers() override;
  // The transfer stream (created on first use) made to wait for the work queued so far on the
  // compute stream, and the next free transfer event (created as needed).
  void xfer_wait_for_compute();
  cudaEvent_t next_xfer_event();

  void set_step_scalars(const StepScalars& s) override;

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

  void adamw_step(std::span<ParamSlot> params, const AdamWHyper& h) override;
  void sgd_step(std::span<ParamSlot> params, const SgdHyper& h) override;
  void lion_step(std::span<ParamSlot> params, const LionHyper& h) override;
  void adamw8bit_step(std::span<ParamSlot> params, std::span<const Quant8State> state, const AdamWHyper& h,
                      int block) override;
  void adafactor_step(std::span<ParamSlot> params, std::span<const FactoredState> state,
                      const AdafactorHyper& h) override;
  bool all_finite(std::span<const Tensor* const> tensors) override;

  // Transformer operations (cuda_transformer_ops.cpp; kernels/transformer_ops.cu).
  void embedding_forward(const Tensor& tok, const Tensor& pos, const Tensor& idx, int64_t T, Tensor& out) override;
  void embedding_backward(const Tensor& dout, const Tensor& idx, int64_t T, Tensor& dtok, Tensor& dpos,
                          bool accumulate) override;
  void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                         Tensor& rstd) override;
  void layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd, const Tensor& dy,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool accumulate_dx, bool accumulate_params,
                          Tensor* dx_sums = nullptr) override;
  void dropout(const Tensor& x, float p, uint64_t seed, Tensor& y, uint64_t first = 0) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gelu_forward(const Tensor& x, Tensor& y) override;
  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) override;

  // Fused causal attention (cuda_attention.cpp; kernels/attention.cu).
  void attention_forward(const Tensor& qkv, int64_t B, int64_t T, int64_t H, Tensor& y, Tensor& lse,
                         MatmulMode mode) override;
  void attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, int64_t B, int64_t T,
                          int64_t H, Tensor& dqkv, MatmulMode mode) override;

  // Compression operations (cuda_compress_ops.cpp; kernels/quant.cu).
  void fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) override;
  void quantize_i8(const Tensor& x, float scale, Tensor& q) override;
  void gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) override;
  void int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales, const Tensor* bias,
                   Activation act, Tensor& y) override;
  void distill_backward(const Tensor& student_logits, const Tensor& teacher_logits, float temperature, float alpha,
                        float grad_multiplier, Tensor& dlogits, Tensor* kl_sum, bool accumulate) override;
  // Token decoding (cuda_decoder.cpp; kernels/decode.cu).
  std::unique_ptr<TokenDecoder> create_decoder(const DecodeWeights& weights, const DecodeSpec& spec) override;

  // Device collectives (NCCL): nccl_collectives.cpp, or no_nccl.cpp in a build without NCCL.
  bool supports_collectives() const override;
  std::vector<uint8_t> new_collectives_id() override;
  std::unique_ptr<DeviceCollectives> create_collectives(const std::vector<uint8_t>& id, int rank, int size) override;

  void run_step(const std::string& key, const std::function<void()>& step) override;
  void invalidate_captures() override;

  void set_kernel_timing(bool on) override;
  std::vector<KernelTime> kernel_times() const override;
  void reset_kernel_times() override;

  CudaContext& context() { return m_ctx; }
  const DeviceOptions& options() const { return m_options; }

 private:
  friend class Fp8Gemm;
  friend class LtGemm;
  friend class NcclCollectives;
  friend class TimedOp;
  void bind() const;  // makes the device current and launches deferred gathers
  void flush_gathers() const;
  void note_scalar_read() { if (m_ctx.capturing) m_ctx.capture_scalars_read = true; }
  // `t` in format `want`: the tensor itself, or a converted copy in workspace slot `slot`.
  Tensor as_format(const Tensor& t, DType want, int slot);
  void stage_h2d(void* dst, const void* src, size_t bytes);
  void timing_begin(const char* name, const OpCost& cost = {});
  void timing_end();
  void collect_timings() const;

  mutable CudaContext m_ctx;
  DeviceOptions m_options;
  static constexpr int kWorkspaceSlots = 6;
  std::array<Tensor, kWorkspaceSlots> m_workspace;
  // Fp8 products run on fp8 matrix units (sm_89 and later); elsewhere MatmulMode::Fp8 computes as
  // Native on the bf16 tensors. The scales' delayed-scaling state is Fp8Gemm's, per weight.
  bool m_fp8_units = false;
  std::unique_ptr<Fp8Gemm> m_fp8_gemm;
  std::unique_ptr<LtGemm> m_lt_gemm;  // cuBLASLt for the large products (lt_gemm.h)
  // fp32 scratch of the transformer operations' deterministic column reductions (grown, never
  // shrunk, so a captured step keeps its address).
  Tensor m_reduce_scratch;
  Tensor m_dynamic_maps;  // 8-bit AdamW's code maps (tensor/dynamic_map.h), signed then unsigned
  Tensor m_adafactor_scratch;  // Adafactor's per-tensor sums (kernels/optim_adafactor.cuh)
  float* reduce_scratch(int64_t floats);
  bool linear_backward_lt(const Tensor& g, const Tensor& px, const Tensor& pw, int64_t m, int64_t n, int64_t k, bool tf32,
                          Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate);
  bool m_lt_ok = true;
  // Gathers of a step's batch are deferred and launched together with the next operation (with
  // the batch's compute-format copy fused in when copy() asks for it): one launch, not three.
  mutable std::vector<kern::GatherJob> m_gathers;
};

// RAII: per-kernel timing around one operation.
class TimedOp {
 public:
  TimedOp(CudaBackend* be, const char* name, bool on, const OpCost& cost = {});
  ~TimedOp();

 private:
  CudaBackend* m_be;
  bool m_on;
};

}  // namespace trainlab::cuda
