#include "dist/process_groups.h"

#include "util/error.h"

namespace trainlab::dist {

GridPlace grid_place(int rank, int world, ParallelDegrees d) {
  if (d.tensor < 1 || d.pipeline < 1 || world % (d.tensor * d.pipeline) != 0)
    throw Error("tensor x pipeline parallel degrees " + std::to_string(d.tensor) + " x " + std::to_string(d.pipeline) +
                " do not divide the " + std::to_string(world) + " ranks");
  const int dp = world / (d.tensor * d.pipeline);
  GridPlace p;
  p.tp = rank % d.tensor;
  p.dp = (rank / d.tensor) % dp;
  p.pp = rank / (d.tensor * dp);
  return p;
}

ProcessGroups::ProcessGroups(std::unique_ptr<Communicator> world, ParallelDegrees degrees, Backend& be)
    : m_world(std::move(world)), m_degrees(degrees) {
  const int w = m_world->size(), r = m_world->rank();
  m_place = grid_place(r, w, degrees);
  const int dp = data_parallel_size();
  // Colour = the coordinates the group's members share; key = the coordinate that varies.
  if (dp != w) m_data = m_world->split(m_place.tp + degrees.tensor * m_place.pp, m_place.dp);
  m_tensor = degrees.tensor > 1 ? m_world->split(m_place.dp + dp * m_place.pp, m_place.tp)
                                : make_single_rank(be, m_world->timeout_s());
  m_pipeline = degrees.pipeline > 1 ? m_world->split(m_place.tp + degrees.tensor * m_place.dp, m_place.pp)
                                    : make_single_rank(be, m_world->timeout_s());
}

Communicator& ProcessGroups::group(const std::string& name) {
  if (name == "world") return world();
  if (name == "data") return data_parallel();
  if (name == "tensor") return tensor_parallel();
  if (name == "pipeline") return pipeline_parallel();
  throw Error("no process group '" + name + "': the groups are world, data, tensor and pipeline");
}

}  // namespace trainlab::dist
