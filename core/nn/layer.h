// Layer: explicit forward and backward. A layer keeps what its backward needs from the last
// forward (its input and/or output) and reuses its output buffers from step to step while shapes
// and formats stay the same (so a captured step sees the same buffers on every replay).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/parameter.h"

namespace trainlab {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string type() const = 0;
  // `training` false: nothing needs to be kept for backward.
  virtual Tensor forward(Backend& be, const Tensor& x, bool training) = 0;
  // Returns dx (undefined when need_dx is false). Gradients are written (accumulate=false) or added.
  virtual Tensor backward(Backend& be, Tensor& dy, bool need_dx, bool accumulate) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  // Drops buffers and saved tensors (after a change of format or batch shape).
  virtual void release_buffers() {}

  std::string name;  // prefix of the parameters' names, e.g. "net.0"
  // The mode of the layer's matrix products: the owning model's (Model::set_matmul_mode sets it).
  MatmulMode matmul_mode = MatmulMode::Native;

 protected:
  // Returns `buf` when it already has this shape and format, else a fresh activation buffer.
  static Tensor& ensure(Backend& be, Tensor& buf, const Shape& shape, DType dtype);
};

}  // namespace trainlab
