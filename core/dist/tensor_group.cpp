#include "dist/tensor_group.h"

#include <chrono>
#include <cstring>
#include <vector>

namespace trainlab::dist {

namespace {

// Runs f and adds its host time to `seconds`.
template <typename F>
void timed(double& seconds, F f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_rows(const Tensor& whole, const Tensor& part, int ranks, const char* what) {
  if (whole.numel() != part.numel() * ranks)
    throw Error(std::string("tensor-parallel ") + what + ": " + shape_str(whole.shape()) + " is not " +
                std::to_string(ranks) + " parts of " + shape_str(part.shape()));
}

}  // namespace

void CommTensorGroup::all_reduce(Tensor& t) {
  timed(m_seconds, [&] { m_comm.all_reduce(t)->wait(); });
}

void CommTensorGroup::all_gather_rows(const Tensor& part, Tensor& whole) {
  check_rows(whole, part, size(), "all-gather");
  const std::vector<int64_t> counts(static_cast<size_t>(size()), part.numel());
  timed(m_seconds, [&] { m_comm.all_gather(part, whole, counts)->wait(); });
}

void CommTensorGroup::reduce_scatter_rows(const Tensor& whole, Tensor& part) {
  check_rows(whole, part, size(), "reduce-scatter");
  const std::vector<int64_t> counts(static_cast<size_t>(size()), part.numel());
  timed(m_seconds, [&] { m_comm.reduce_scatter(whole, part, counts)->wait(); });
}

void CommTensorGroup::all_reduce_host(std::span<double> v, bool max) {
  timed(m_seconds, [&] { m_comm.all_reduce_host(v, max ? HostReduce::Max : HostReduce::Sum); });
}

std::vector<std::vector<float>> gather_whole_masters(Backend& be, Communicator& group,
                                                     const std::vector<Parameter*>& params) {
  const int t = group.size();
  std::vector<std::vector<float>> whole(params.size());
  std::vector<uint8_t> mine;
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    std::vector<float> v(static_cast<size_t>(p.numel()));
    be.download(p.master, v.data(), DType::F32);
    if (!p.shard.split()) {
      whole[i] = std::move(v);
      continue;
    }
    whole[i].assign(static_cast<size_t>(shape_numel(p.whole)), 0.0f);
    const auto* b = reinterpret_cast<const uint8_t*>(v.data());
    mine.insert(mine.end(), b, b + v.size() * sizeof(float));
  }
  for (int r = 0; r < t; ++r) {
    std::vector<uint8_t> blob = r == group.rank() ? mine : std::vector<uint8_t>();
    group.broadcast_host(blob, r);
    size_t at = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const Parameter& p = *params[i];
      if (!p.shard.split()) continue;
      const int64_t n = shape_numel(shard_shape(p.whole, p.shard, t, r));
      if (at + static_cast<size_t>(n) * sizeof(float) > blob.size())
        throw Error("tensor-parallel gather: rank " + std::to_string(r) + " sent " + std::to_string(blob.size()) +
                    " bytes, fewer than its shards of " + p.name + " need");
      std::vector<float> part(static_cast<size_t>(n));
      std::memcpy(part.data(), blob.data() + at, part.size() * sizeof(float));
      at += part.size() * sizeof(float);
      put_shard(part, p.whole, p.shard, t, r, whole[i]);
    }
  }
  return whole;
}

double CommTensorGroup::take_seconds() {
  const double s = m_seconds;
  m_seconds = 0.0;
  return s;
}

}  // namespace trainlab::dist
