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
// How the products see it: before each forward the adapters are folded into the base model's
// weight W' (its master, and its compute copy in 16-bit runs), so the model's own products (every
// precision, checkpoint policy and backend product) compute y = W' x = W x + s B A x. The base's
// backward then leaves dL/dW' = G in the weight's gradient slot (a workspace here: the base's
// gradient buffer is relabelled so in the ledger), from which the adapters' gradients follow:
//   dB = s G A^T,  dA = s B^T G                               (lora, qlora)
//   dV = (m/n) (G - (G.V / n^2) V) row-wise (n = ||V||), dB, dA from dV, dm = G.V / n   (dora)
// The adapter arithmetic is host code in fp32 (the CPU backend's reference); a device backend is
// refused for now (docs/FINETUNE.md). A merged model's weights are exactly the W' the run used.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/finetune_options.h"
#include "finetune/nf4.h"
#include "nn/transformer.h"
#include "plan/finetune_memory.h"

namespace trainlab {

struct Adapter {
  FinetuneTarget target;
  Parameter* weight = nullptr;  // the base model's weight [out, in]: holds W' during the run
  Tensor frozen;                // lora, dora: W fp32 [out, in] (ledger: weights)
  Tensor nf4_bytes;             // qlora: codes and block-scale codes, I8 (ledger: weights)
  Tensor nf4_scales;            // qlora: the block-scale scales and the offset, F32
  Parameter a, b, m;            // A [r, in], B [out, r], m [out] (dora)
};

class AdaptedModel final : public Model {
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

  // Folds the adapters into the base's weights (W' above); forward() does it each time.
  void fold(Backend& be);
  CharGpt& base() { return *m_base; }
  const FinetuneOptions& options() const { return m_opt; }
  std::vector<Adapter>& adapters() { return m_adapters; }
  // The ledger's lines of this run, measured from the tensors held (plan/finetune_memory.h).
  FinetuneMemory memory(int64_t optimizer_bytes) const;
  // The W' of one adapter from its current values (host, fp32), as fold() writes it.
  std::vector<float> effective_weight(Backend& be, const Adapter& ad) const;

 protected:
  void on_matmul_mode() override { m_base->set_matmul_mode(m_matmul_mode); }

 private:
  std::vector<float> frozen_weight(Backend& be, const Adapter& ad) const;
  std::unique_ptr<CharGpt> m_base;
  FinetuneOptions m_opt;
  std::vector<Adapter> m_adapters;  // not resized after construction (the builder holds addresses)
};

// The PEFT tensor names of an adapter file: base_model.model.<module>.lora_A.weight, .lora_B.weight
// and (dora) .lora_magnitude_vector.
std::string peft_name(const std::string& module, const char* part);

}  // namespace trainlab
