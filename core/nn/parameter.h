// Parameter: one trainable tensor with its fp32 master copy, compute copy, gradient, optimizer
// state and optional pruning mask.
//
// Memory roles (what the ledger counts): in fp32 runs `value` IS `master` and is counted as
// weights. In 16-bit runs `value` (2 bytes a weight) is the weights and `master` (4 bytes) is
// counted with the optimizer state, as mixed-precision Adam's 16 bytes a parameter are split.
//
// In a model, master, value, grad, m and v are views into the model's flat buffers (one per
// role, nn/flat_params.h); `mask` (pruning) is a tensor of its own.
#pragma once
#include <string>

#include "backend/backend.h"
#include "nn/tensor_split.h"

namespace trainlab {

// The format parameters are stored in for a compute format: fp8 is a matmul input format only,
// so parameters of an fp8 run are kept in bf16 (the fp8 casts happen inside the matrix products:
// on fp8 units, or emulated on the CPU).
DType parameter_storage_dtype(DType compute);

struct Parameter {
  std::string name;  // PyTorch state_dict name, e.g. "net.0.weight"
  Shape shape;
  Tensor master;     // fp32
  Tensor value;      // compute format; same storage as master in fp32
  Tensor grad;       // compute format
  Tensor m, v;       // optimizer state (fp32), created by the optimizer
  Tensor mask;       // fp32 0/1, optional
  bool decay = true;
  bool embedding = false;  // a lookup table (8-bit AdamW's optim.stable_embedding keeps its state in fp32)
  // Tensor parallelism (nn/tensor_split.h): how the whole tensor is split over the group, and its
  // whole shape (`shape` is this rank's part); not split: every rank holds it whole.
  ShardSpec shard;
  Shape whole;
  const Shape& whole_shape() const { return shard.split() ? whole : shape; }

  int64_t numel() const { return shape_numel(shape); }
  // Sets the compute format of this one parameter: value/grad are kept when already in the
  // format (a model's flat views stay views) and allocated on their own otherwise; master is
  // rounded into value. A whole model switches with Model::set_compute_dtype, which re-creates
  // the flat buffers.
  void set_compute_dtype(Backend& be, DType dtype);
  ParamSlot slot() { return ParamSlot{&master, &value, &grad, &m, &v, &mask, decay}; }
};

}  // namespace trainlab
