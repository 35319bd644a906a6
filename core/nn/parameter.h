// Parameter: one trainable tensor with its fp32 master copy, compute copy, gradient, optimizer
// state and optional pruning mask.
//
// Memory roles (what the ledger counts): in fp32 runs `value` IS `master` and is counted as
// weights. In 16-bit runs `value` (2 bytes a weight) is the weights and `master` (4 bytes) is
// counted with the optimizer state, as mixed-precision Adam's 16 bytes a parameter are split.
#pragma once
#include <string>

#include "backend/backend.h"

namespace trainlab {

struct Parameter {
  std::string name;  // PyTorch state_dict name, e.g. "net.0.weight"
  Shape shape;
  Tensor master;     // fp32
  Tensor value;      // compute format; same storage as master in fp32
  Tensor grad;       // compute format
  Tensor m, v;       // optimizer state (fp32), created by the optimizer
  Tensor mask;       // fp32 0/1, optional
  bool decay = true;

  int64_t numel() const { return shape_numel(shape); }
  // Sets the compute format: allocates value/grad in `dtype` and rounds master into value.
  void set_compute_dtype(Backend& be, DType dtype);
  ParamSlot slot() { return ParamSlot{&master, &value, &grad, &m, &v, &mask, decay}; }
};

}  // namespace trainlab
