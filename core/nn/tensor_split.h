// Tensor parallelism as the model sees it (Megatron-LM, Shoeybi et al. 2019): a layer's weights
// split over the t ranks of a tensor-parallel group, and the group's collectives, which core/dist
// implements over a Communicator (nn sits below dist, so the model asks through this interface).
//
// How a parameter is split (Parameter::shard): `axis` 0 splits rows (a column-parallel linear's
// output features, a vocabulary-parallel table's tokens), 1 splits columns (a row-parallel
// linear's input features), -1 keeps it whole on every rank (LayerNorms, the row-parallel
// products' biases, the position table). `blocks` > 1 splits each of that many equal blocks of the
// axis on its own (qkv: q | k | v, so that a rank's rows are q, k and v of its heads, in that
// order). Rank r of t holds elements [begin, end) of each block with c = ceil(n / t),
// begin = min(n, r c), end = min(n, (r + 1) c): equal parts where t divides n (heads, widths), and
// a shorter last part for a vocabulary that t does not divide (65 characters over 2 ranks: 33, 32).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace trainlab {

struct ShardSpec {
  int axis = -1;   // -1 whole on every rank, 0 rows, 1 columns
  int blocks = 1;  // equal blocks of the axis split one by one (qkv: 3)
  bool split() const { return axis >= 0; }
};

// [begin, end) of n for rank r of t (the split above).
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
IndexRange split_range(int64_t n, int t, int r);

// The shape rank r of t holds of a `whole` shape under `s`.
Shape shard_shape(const Shape& whole, const ShardSpec& s, int t, int r);
// Rank r's elements of `whole` (row-major values of shape `shape`), row-major in its shard shape.
std::vector<float> take_shard(std::span<const float> whole, const Shape& shape, const ShardSpec& s, int t, int r);
// Writes rank r's shard values (take_shard's layout) into their places of `whole`.
void put_shard(std::span<const float> part, const Shape& shape, const ShardSpec& s, int t, int r, std::span<float> whole);

// The collectives of a tensor-parallel group, blocking (the model's next operation needs their
// result). Tensors live on the model's backend; sums are in the tensor's format (as
// Communicator::all_reduce).
class TensorGroup {
 public:
  virtual ~TensorGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // t = the sum over the group of t, in place.
  virtual void all_reduce(Tensor& t) = 0;
  // whole [t * n, ...] = every rank's part [n, ...], in rank order (rows).
  virtual void all_gather_rows(const Tensor& part, Tensor& whole) = 0;
  // part [n, ...] = rows [r n, (r + 1) n) of the sum over the group of whole [t * n, ...].
  virtual void reduce_scatter_rows(const Tensor& whole, Tensor& part) = 0;
  // Host values: sums (or maxima) over the group, in place.
  virtual void all_reduce_host(std::span<double> v, bool max) = 0;
};

// A model's tensor-parallel setting: its group (null: one rank) and whether the residual stream
// is split by tokens too (sequence parallelism, Korthikanti et al. 2022).
struct TensorParallel {
  TensorGroup* group = nullptr;
  bool sequence_parallel = false;
  int size() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank() : 0; }
  bool active() const { return size() > 1; }
};

// The vocabulary-parallel cross-entropy (Megatron's): `logits` [N, n] are this rank's columns
// [first, first + n) of the whole vocabulary's logits, `labels` int32 [N] whole-vocabulary ids.
// The group reduces each row's maximum, its sum of exp(z - max) and its target logit, so no
// rank gathers the logits: loss = log(sum) + max - z[label]; dlogits (this rank's columns) =
// (softmax - onehot) * grad_multiplier * the loss scale; the row is correct when the whole row's
// first maximum is at its label. stats as Backend::softmax_xent, equal on every rank of the group.
// Computed on the host in fp32 with the row statistics reduced in fp64 (the logits are copied
// down and the gradient up: tensor parallelism here is for seeing the split, not for speed).
void vocab_parallel_xent(Backend& be, TensorGroup& group, const Tensor& logits, int64_t first, const Tensor& labels,
                         Tensor* dlogits, float grad_multiplier, Tensor& stats, bool accumulate_stats);

}  // namespace trainlab
