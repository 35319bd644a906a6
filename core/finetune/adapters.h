// Low-rank adapters over a trained char-gpt (Hu et al. 2021 LoRA; Dettmers et al. 2023 QLoRA;
// Liu et al. 2024 DoRA), as PEFT builds them: an adapter wraps a base product W [out, in], the
// base frozen (no gradient, no optimizer state), the adapter the only trainable part.
//
//   lora    W' = W + s B A,             s = alpha / r, A [r, in] ~ kaiming-uniform(a = sqrt(5))
//                                       (PEFT's init: U(-1/sqrt(in), 1/sqrt(in))), B [out, r] = 0
//   qlora   W' = deq(NF4(W)) + s B A    the frozen base kept only as NF4 (finetune/nf4.h)
//   dora    V = W + s B A,  W' = (m / ||V||_row) V,  m [out] initialised to ||W||_row (PEFT's
//           weight norm over the input dimension, one per output row). Backward takes the norm's
//           derivative too (PEFT and the paper's section 4.3 detach it to save the memory of its
//           graph; here it costs nothing, and the gradient is the exact one)
//
// lora and qlora run as adapter products (the model's ProductHook, nn/transformer.h), W' never
// formed and the base taking no gradient at all (no gradient buffer):
//   forward   y = x W^T + b + s (x A^T) B^T
//   backward  dx = dy W + s (dy B) A;  dB = s dy^T (x A^T);  dA = s (dy B)^T x;  no dW
// all of them the backend's gemm and linear products (CPU and CUDA alike). qlora keeps the
// targets' weights only as NF4 (the base's flat buffers are rebuilt without them) and
// dequantizes one product's W at a time into one shared scratch buffer in the compute format
// (on the host, then uploaded).
// dora keeps the effective-weight path: before each forward W' is folded into the base's
// weight (its master, and its compute copy in 16-bit runs), the base's backward leaves dL/dW' = G
// in the weight's gradient slot (a workspace in the ledger), and on the host in fp32:
//   dV = (m/n) (G - (G.V / n^2) V) row-wise (n = ||V||), dB = s dV A^T, dA = s B^T dV, dm = G.V / n
// A merged model's weights are exactly the W' the run computed with (fold()).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/finetune_options.h"
#include "finetune/nf4.h"
#include "nn/transformer.h"
#include "plan/finetune_memory.h"

namespace trainlab {

struct Adapter {
  FinetuneTarget target;
  Parameter* weight = nullptr;  // the base model's weight [out, in]: W (lora), undefined (qlora),
                                // W' during the run (dora); W' after fold()
  Tensor frozen;                // dora: W fp32 [out, in] (ledger: weights)
  Tensor nf4_bytes;             // qlora: codes and block-scale codes, I8 (ledger: weights)
  Tensor nf4_scales;            // qlora: the block-scale scales and the offset, F32
  Parameter a, b, m;            // A [r, in], B [out, r], m [out] (dora)
};

class AdaptedModel final : public Model, private ProductHook {
 public:
  // `base`: the trained char-gpt (its weights loaded); `seed` draws A. Throws Error for a rank
  // larger than a target's smaller dimension.
  AdaptedModel(Backend& be, std::unique_ptr<CharGpt> base, const FinetuneOptions& o, uint64_t seed);
  std::string kind() const override { return m_base->kind(); }
  Tensor forward(Backend& be, const Tensor& x, bool training) override;
  void backward(Backend& be, Tensor& dlogits, bool accumulate) override;
  std::vector<Parameter*> parameters() override;  // the adapters only: what the optimizer gets
  void release_buffers() override { m_base->release_buffers(); }
  nlohmann::json architecture() const override { return m_base->architecture(); }
  nlohmann::json random_state() const override { return m_base->random_state(); }
  void set_random_state(const nlohmann::json& s) override { m_base->set_random_state(s); }
  void cross_entropy(Backend& be, const Tensor& logits, const Tensor& labels, Tensor* dlogits, float mult,
                     Tensor& stats, bool acc) override {
    m_base->cross_entropy(be, logits, labels, dlogits, mult, stats, acc);
  }

  // Folds the adapters into the base's weights (W' above): dora's forward() does it each time;
  // for lora and qlora it merges for good (the base's products read W' from then on, the
  // adapters no longer take part; a second call does nothing).
  void fold(Backend& be);
  // lora and qlora: the adapter products (no W', no base gradient); dora: the folded W'.
  bool adapter_products() const { return m_opt.method != FinetuneMethod::Dora; }
  CharGpt& base() { return *m_base; }
  const FinetuneOptions& options() const { return m_opt; }
  std::vector<Adapter>& adapters() { return m_adapters; }
  // The ledger's lines of this run, measured from the tensors held (plan/finetune_memory.h).
  FinetuneMemory memory(int64_t optimizer_bytes) const;
  // The W' of one adapter from its current values (host, fp32), as fold() writes it.
  std::vector<float> effective_weight(Backend& be, const Adapter& ad) const;

 protected:
  void on_matmul_mode() override;

 private:
  // ProductHook (nn/transformer.h): the adapter products of lora and qlora.
  const Tensor& weight(Backend& be, const Parameter& w) override;
  void adapter_forward(Backend& be, const Parameter& w, const Tensor& x, Tensor& y) override;
  void adapter_backward(Backend& be, const Parameter& w, const Tensor& x, const Tensor& dy) override;
  void adapter_backward_dx(Backend& be, const Parameter& w, Tensor& dx) override;
  const Adapter* adapter_of(const Parameter& w) const;
  bool is_target(const Parameter* p) const;
  Tensor& rank_scratch(Backend& be, Tensor& t, const Tensor& x);
  // qlora: the base's flat buffers rebuilt without the targeted weights (kept as NF4 only).
  void drop_target_weights(Backend& be);
  void fold_effective(Backend& be);  // dora: W' into the base's weights
  void backward_folded(Backend& be, bool accumulate);  // dora: adapter gradients from dL/dW'
  std::vector<float> frozen_weight(Backend& be, const Adapter& ad) const;
  std::unique_ptr<CharGpt> m_base;
  FinetuneOptions m_opt;
  std::vector<Adapter> m_adapters;  // not resized after construction (the builder holds addresses)
  std::unordered_map<const Parameter*, const Adapter*> m_by_weight;
  bool m_merged = false;            // lora, qlora: fold() ran
  bool m_accumulate = false;        // the current backward's
  Tensor m_deq;                     // qlora: the dequantization scratch (largest target, compute format)
  const Adapter* m_deq_of = nullptr;  // whose W m_deq holds now
  Tensor m_deq_view;
  Tensor m_u, m_t;                  // [N, r] scratch: x A^T, dy B
};

// The PEFT tensor names of an adapter file: base_model.model.<module>.lora_A.weight, .lora_B.weight
// and (dora) .lora_magnitude_vector.
std::string peft_name(const std::string& module, const char* part);

}  // namespace trainlab
