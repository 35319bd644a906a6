// Model: what the trainer trains. forward() maps a batch to logits [N, classes]; backward() takes
// the loss gradient w.r.t. those logits and fills every parameter's gradient.
// Parameters live in flat buffers laid out in parameters() order (flat_params()): each model
// declares its parameters to a FlatParamsBuilder while its layers are built, then finishes it.
// While it runs, a model tells the ModelHooks set on it (core/dist's data-parallel driver) which
// parameters each unit reads and which gradients are final.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "nn/flat_params.h"
#include "nn/layer.h"

namespace trainlab {

// What a model tells a data-parallel driver (core/dist) while it runs, in positions of
// parameters() (the flat layout's order). A unit is what reads a group of parameters together (a
// layer, a transformer block, the embedding, the final norm and head): before_unit and after_unit
// bracket each of its forward and backward computations (a recomputed forward under activation
// checkpointing too), so ZeRO-3 can gather those parameters just in time and free them after.
// grads_ready(first) says that every gradient of parameters [first, size) is final for this
// backward pass (backward runs from the last parameter to the first), so a bucket of gradients can
// be reduced while the rest of the backward goes on.
class ModelHooks {
 public:
  virtual ~ModelHooks() = default;
  virtual void before_unit(size_t first, size_t last, bool backward) {}
  virtual void after_unit(size_t first, size_t last, bool backward) {}
  virtual void grads_ready(size_t first) {}
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string kind() const = 0;
  virtual Tensor forward(Backend& be, const Tensor& x, bool training) = 0;
  virtual void backward(Backend& be, Tensor& dlogits, bool accumulate) = 0;
  virtual std::vector<Parameter*> parameters() = 0;
  virtual void release_buffers() = 0;
  // Enough to rebuild the model (stored in the weights file's metadata).
  virtual nlohmann::json architecture() const = 0;
  // The model's random state beyond its seed (the char GPT's dropout draws so far), kept by a run
  // checkpoint so that a resumed run draws the masks an uninterrupted one would: a JSON object,
  // empty for a model that draws nothing. set_random_state throws Error for a state it cannot take.
  virtual nlohmann::json random_state() const { return nlohmann::json::object(); }
  virtual void set_random_state(const nlohmann::json& state);
  // The fused softmax and cross-entropy of forward()'s logits against int32 labels (Backend::
  // softmax_xent's contract: stats fp32 [2] = {loss sum, correct}, dlogits scaled by
  // grad_multiplier and the loss scale). A tensor-parallel model whose logits are its slice of
  // the vocabulary overrides it with the vocabulary-parallel form.
  virtual void cross_entropy(Backend& be, const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                             float grad_multiplier, Tensor& stats, bool accumulate_stats) {
    be.softmax_xent(logits, labels, dlogits, grad_multiplier, stats, accumulate_stats);
  }

  // Switches the compute format of every parameter (fp32 master copies are kept): the flat value
  // and gradient buffers are re-created in the new format (FlatParams::set_compute_dtype).
  void set_compute_dtype(Backend& be, DType dtype);
  // The flat layout of parameters(): offsets, and ranges of the master, value, gradient and
  // optimizer-state buffers (a gradient bucket or a ZeRO shard).
  FlatParams flat_params() { return FlatParams(parameters()); }
  DType compute_dtype() const { return m_dtype; }
  // The mode every matrix product of the model computes in (Backend's MatmulMode: the precision
  // policy picks it per run; Native by default). A step the backend has captured keeps the mode it
  // was captured with: after a change, call Backend::invalidate_captures().
  void set_matmul_mode(MatmulMode mode) {
    m_matmul_mode = mode;
    on_matmul_mode();
  }
  MatmulMode matmul_mode() const { return m_matmul_mode; }
  int64_t parameter_count();
  Parameter* find_parameter(const std::string& name);
  // The driver told about units and finished gradients (null: none). Models that do not report
  // (wrappers) leave hooks unset; a driver then reduces every gradient after the backward.
  virtual bool reports_units() const { return false; }
  void set_hooks(ModelHooks* hooks) { m_hooks = hooks; }
  ModelHooks* hooks() const { return m_hooks; }

 protected:
  void unit_begins(size_t first, size_t last, bool backward) {
    if (m_hooks) m_hooks->before_unit(first, last, backward);
  }
  void unit_ends(size_t first, size_t last, bool backward) {
    if (m_hooks) m_hooks->after_unit(first, last, backward);
  }
  void grads_ready(size_t first) {
    if (m_hooks) m_hooks->grads_ready(first);
  }
  ModelHooks* m_hooks = nullptr;
  // Passes a new matmul mode on to what the model holds (its layers, wrapped models).
  virtual void on_matmul_mode() {}
  DType m_dtype = DType::F32;
  MatmulMode m_matmul_mode = MatmulMode::Native;
};

// A stack of layers named like PyTorch's nn.Sequential: the layer at index i owns "prefix.i.*".
// An activation fused into a Linear still takes its own index, so that the names match a
// PyTorch module that lists the activation as a separate layer.
class Sequential : public Model {
 public:
  explicit Sequential(std::string prefix) : m_prefix(std::move(prefix)) {}
  void add(std::unique_ptr<Layer> layer, int index_in_pytorch);
  Tensor forward(Backend& be, const Tensor& x, bool training) override;
  void backward(Backend& be, Tensor& dlogits, bool accumulate) override;
  std::vector<Parameter*> parameters() override;
  void release_buffers() override;
  const std::vector<std::unique_ptr<Layer>>& layers() const { return m_layers; }
  bool reports_units() const override { return true; }  // a unit per layer

 protected:
  void on_matmul_mode() override;
  std::string m_prefix;
  std::vector<std::unique_ptr<Layer>> m_layers;
  std::vector<size_t> m_first_param;  // position of layer i's first parameter (size: layers + 1)
};

// Multi-layer perceptron: sizes {in, hidden..., out}, the activation after every hidden layer.
// The digits MLP is {64, 256, 256, 10} with ReLU: 85,002 parameters, named net.0, net.2, net.4
// as in the PyTorch peer's nn.Sequential.
class Mlp final : public Sequential {
 public:
  Mlp(Backend& be, std::vector<int64_t> sizes, Activation act, uint64_t seed);
  std::string kind() const override { return "mlp"; }
  nlohmann::json architecture() const override;
  const std::vector<int64_t>& sizes() const { return m_sizes; }

 private:
  std::vector<int64_t> m_sizes;
  Activation m_act;
};

// Builds a model from an architecture object (as written by architecture()); throws Error for an
// unknown kind, naming the known ones.
std::unique_ptr<Model> build_model(Backend& be, const nlohmann::json& arch, uint64_t seed);

// The name and shape of every parameter of the model an architecture object describes, in
// parameters() order, passed to `visit` one at a time without building the model: io checks a
// weights file's tensors against them before anything is allocated (and a visitor that throws
// stops a long list at its first parameter the file lacks). Strict, since it reads files: an
// unknown kind or activation, a missing key, a size that is not an integer in its range is an
// Error naming the key and the expected value (never echoing the value).
//   mlp       sizes: at least 2 integers in [1, 2^24]; activation relu, gelu or none
//   char-gpt  vocab [2, 2^21], layers [1, 1024], heads [1, 1024], dim [1, 65536], context [1, 2^20]
//             (the ranges of the model.* keys), then CharGptConfig::validate
using ParameterVisitor = std::function<void(const std::string& name, const Shape& shape)>;
void visit_architecture(const nlohmann::json& arch, const ParameterVisitor& visit);
// An integer key of an architecture object in [lo, hi]; Error "key 'KEY': expected an integer in
// [lo, hi]" when it is missing, not an integer (a float or a bool) or out of range.
int64_t architecture_int(const nlohmann::json& arch, const char* key, int64_t lo, int64_t hi);

}  // namespace trainlab
