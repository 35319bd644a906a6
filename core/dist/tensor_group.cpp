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

int64_t whole_numel(const std::vector<Parameter*>& params) {
  int64_t n = 0;
  for (const Parameter* p : params) n += shape_numel(p->whole_shape());
  return n;
}

std::vector<float> gather_whole_flat(Communicator& group, const std::vector<Parameter*>& params,
                                     const std::vector<float>& local) {
  const int t = group.size();
  // This rank's shards, end to end: its message to the others.
  std::vector<uint8_t> mine;
  int64_t at = 0;
  for (const Parameter* p : params) {
    if (p->shard.split()) {
      const auto* b = reinterpret_cast<const uint8_t*>(local.data() + at);
      mine.insert(mine.end(), b, b + p->numel() * static_cast<int64_t>(sizeof(float)));
    }
    at += p->numel();
  }
  if (at != static_cast<int64_t>(local.size()))
    throw Error("internal: a local flat vector of " + std::to_string(local.size()) + " values for " + std::to_string(at) +
                " parameter elements");
  std::vector<float> whole(static_cast<size_t>(whole_numel(params)));
  // Whole parameters from this rank's own values.
  int64_t w = 0;
  at = 0;
  for (const Parameter* p : params) {
    if (!p->shard.split()) std::copy_n(local.begin() + at, p->numel(), whole.begin() + w);
    at += p->numel();
    w += shape_numel(p->whole_shape());
  }
  for (int r = 0; r < t; ++r) {
    std::vector<uint8_t> blob = r == group.rank() ? mine : std::vector<uint8_t>();
    group.broadcast_host(blob, r);
    size_t from = 0;
    w = 0;
    for (const Parameter* p : params) {
      const int64_t wn = shape_numel(p->whole_shape());
      if (p->shard.split()) {
        const size_t n = static_cast<size_t>(shape_numel(shard_shape(p->whole, p->shard, t, r)));
        if (from + n * sizeof(float) > blob.size())
          throw Error("tensor-parallel gather: rank " + std::to_string(r) + " sent " + std::to_string(blob.size()) +
                      " bytes, fewer than its shards of " + p->name + " need");
        std::vector<float> part(n);
        std::memcpy(part.data(), blob.data() + from, n * sizeof(float));
        from += n * sizeof(float);
        put_shard(part, p->whole, p->shard, t, r, std::span<float>(whole.data() + w, static_cast<size_t>(wn)));
      }
      w += wn;
    }
  }
  return whole;
}

std::vector<float> take_local_flat(const std::vector<Parameter*>& params, int t, int r, const std::vector<float>& whole) {
  std::vector<float> local;
  int64_t w = 0;
  for (const Parameter* p : params) {
    const int64_t wn = shape_numel(p->whole_shape());
    if (w + wn > static_cast<int64_t>(whole.size()))
      throw Error("internal: a whole flat vector of " + std::to_string(whole.size()) + " values is too short");
    const std::span<const float> values(whole.data() + w, static_cast<size_t>(wn));
    const std::vector<float> part = take_shard(values, p->whole_shape(), p->shard, t, r);
    local.insert(local.end(), part.begin(), part.end());
    w += wn;
  }
  return local;
}

std::vector<std::vector<float>> gather_whole_masters(Backend& be, Communicator& group,
                                                     const std::vector<Parameter*>& params) {
  std::vector<float> local;
  for (const Parameter* p : params) {
    std::vector<float> v(static_cast<size_t>(p->numel()));
    be.download(p->master, v.data(), DType::F32);
    local.insert(local.end(), v.begin(), v.end());
  }
  const std::vector<float> whole = gather_whole_flat(group, params, local);
  std::vector<std::vector<float>> out;
  int64_t w = 0;
  for (const Parameter* p : params) {
    const int64_t wn = shape_numel(p->whole_shape());
    out.emplace_back(whole.begin() + w, whole.begin() + w + wn);
    w += wn;
  }
  return out;
}

double CommTensorGroup::take_seconds() {
  const double s = m_seconds;
  m_seconds = 0.0;
  return s;
}

}  // namespace trainlab::dist
