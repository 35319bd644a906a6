// CommTensorGroup: the tensor-parallel group's collectives (nn/tensor_split.h's TensorGroup) over
// a Communicator of dist/process_groups.h, each waited for at once (the model's next operation
// reads the result), with the host time they took kept for the step's communication figures.
#pragma once
#include <vector>

#include "dist/communicator.h"
#include "nn/parameter.h"
#include "nn/tensor_split.h"

namespace trainlab::dist {

class CommTensorGroup final : public TensorGroup {
 public:
  explicit CommTensorGroup(Communicator& comm) : m_comm(comm) {}
  int rank() const override { return m_comm.rank(); }
  int size() const override { return m_comm.size(); }
  void all_reduce(Tensor& t) override;
  void all_gather_rows(const Tensor& part, Tensor& whole) override;
  void reduce_scatter_rows(const Tensor& whole, Tensor& part) override;
  void all_reduce_host(std::span<double> v, bool max) override;
  Communicator& comm() { return m_comm; }
  // Seconds spent in the group's collectives since the last call.
  double take_seconds();

 private:
  Communicator& m_comm;
  double m_seconds = 0.0;
};

// The whole model's layout beside a tensor-parallel rank's: `params` are this rank's shards
// (Parameter::shard, whole_shape()), in the one-rank model's order. A "flat" vector holds one
// value per element of every parameter, end to end in that order (nn/flat_params.h): the local
// flat layout has the shards' sizes, the whole one the whole parameters'.
int64_t whole_numel(const std::vector<Parameter*>& params);
// Collective over `group`: the whole flat vector from every rank's local one. Whole parameters
// are this rank's values (equal on every rank); each rank's shards travel as one host message
// (a broadcast from each rank in turn): for checkpoints and the weights file, not for training.
std::vector<float> gather_whole_flat(Communicator& group, const std::vector<Parameter*>& params,
                                     const std::vector<float>& local);
// Rank r of t's local flat vector cut from the whole one (a whole checkpoint resumed split).
std::vector<float> take_local_flat(const std::vector<Parameter*>& params, int t, int r, const std::vector<float>& whole);
// Collective over `group`: every parameter's whole fp32 master values, one vector a parameter.
std::vector<std::vector<float>> gather_whole_masters(Backend& be, Communicator& group, const std::vector<Parameter*>& params);

}  // namespace trainlab::dist
