// ProcessGroups: every group of ranks a run uses, made in one place and asked for by name (as
// Megatron-LM's parallel_state). The world's W ranks form a grid of tensor x data x pipeline
// ranks, W = tp * dp * pp, with the tensor-parallel ranks adjacent (they talk most) and the
// pipeline stages outermost:
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank)
// The data-parallel group of a rank is the ranks that differ from it only in dp_rank (gradients
// are reduced over it, ZeRO shards over it); the tensor-parallel group those that differ only in
// tp_rank; the pipeline group those that differ only in pp_rank. Only data parallelism trains
// today (tp = pp = 1: the data group is the world itself, and the tensor and pipeline groups are
// each rank alone, made without a collective); the grid is what tensor and pipeline parallelism
// will ask for.
#pragma once
#include <memory>
#include <string>

#include "dist/communicator.h"

namespace trainlab::dist {

struct ParallelDegrees {
  int tensor = 1, pipeline = 1;
};

// A rank's coordinates in the grid.
struct GridPlace {
  int tp = 0, dp = 0, pp = 0;
};
// Throws Error when tp * pp does not divide the world's size.
GridPlace grid_place(int rank, int world, ParallelDegrees d);

class ProcessGroups {
 public:
  // Takes the world communicator; `be` serves the one-rank groups. Collective: every rank
  // constructs its groups in the same order.
  ProcessGroups(std::unique_ptr<Communicator> world, ParallelDegrees degrees, Backend& be);
  Communicator& world() { return *m_world; }
  Communicator& data_parallel() { return m_data ? *m_data : *m_world; }
  Communicator& tensor_parallel() { return *m_tensor; }
  Communicator& pipeline_parallel() { return *m_pipeline; }
  // "world", "data", "tensor" or "pipeline"; throws Error naming them for another name.
  Communicator& group(const std::string& name);
  const ParallelDegrees& degrees() const { return m_degrees; }
  GridPlace place() const { return m_place; }
  int data_parallel_size() const { return m_world->size() / (m_degrees.tensor * m_degrees.pipeline); }

 private:
  std::unique_ptr<Communicator> m_world, m_data, m_tensor, m_pipeline;
  ParallelDegrees m_degrees;
  GridPlace m_place;
};

}  // namespace trainlab::dist
