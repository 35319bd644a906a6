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

// Collective over `group`: every parameter's whole fp32 master values (row-major in its whole
// shape), assembled from the group's shards (Parameter::shard); whole parameters are this rank's.
// Each rank's shards travel as one host message (broadcast from each rank in turn): a
// once-a-run transfer (weights file, checkpoints), not a training collective.
std::vector<std::vector<float>> gather_whole_masters(Backend& be, Communicator& group, const std::vector<Parameter*>& params);

}  // namespace trainlab::dist
