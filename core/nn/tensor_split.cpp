#include "nn/tensor_split.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace trainlab {

IndexRange split_range(int64_t n, int t, int r) {
  const int64_t c = (n + t - 1) / t;
  return {std::min(n, r * c), std::min(n, (r + 1) * c)};
}

namespace {

// The shape as (outer, axis length, inner) around the split axis, and the block length.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1, block = 1;
};

AxisView axis_view(const Shape& shape, const ShardSpec& s) {
  if (s.axis < 0 || s.axis >= static_cast<int>(shape.size()) || s.blocks < 1 ||
      shape[static_cast<size_t>(s.axis)] % s.blocks != 0)
    throw Error("internal: shard of axis " + std::to_string(s.axis) + " in " + std::to_string(s.blocks) +
                " blocks does not fit shape " + shape_str(shape));
  AxisView v;
  for (int i = 0; i < s.axis; ++i) v.outer *= shape[static_cast<size_t>(i)];
  v.len = shape[static_cast<size_t>(s.axis)];
  for (size_t i = static_cast<size_t>(s.axis) + 1; i < shape.size(); ++i) v.inner *= shape[i];
  v.block = v.len / s.blocks;
  return v;
}

// Calls f(whole_offset, part_offset, count) for every contiguous run of rank r's elements.
template <typename F>
void for_each_run(const Shape& shape, const ShardSpec& s, int t, int r, F f) {
  const AxisView v = axis_view(shape, s);
  const IndexRange rr = split_range(v.block, t, r);
  const int64_t part_len = rr.size() * s.blocks;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int b = 0; b < s.blocks; ++b) {
      const int64_t whole_at = (o * v.len + b * v.block + rr.begin) * v.inner;
      const int64_t part_at = (o * part_len + b * rr.size()) * v.inner;
      f(whole_at, part_at, rr.size() * v.inner);
    }
}

}  // namespace

Shape shard_shape(const Shape& whole, const ShardSpec& s, int t, int r) {
  if (!s.split()) return whole;
  const AxisView v = axis_view(whole, s);
  Shape out = whole;
  out[static_cast<size_t>(s.axis)] = split_range(v.block, t, r).size() * s.blocks;
  return out;
}

std::vector<float> take_shard(std::span<const float> whole, const Shape& shape, const ShardSpec& s, int t, int r) {
  if (!s.split()) return {whole.begin(), whole.end()};
  std::vector<float> part(static_cast<size_t>(shape_numel(shard_shape(shape, s, t, r))));
  for_each_run(shape, s, t, r, [&](int64_t w, int64_t p, int64_t n) {
    std::copy_n(whole.begin() + w, n, part.begin() + p);
  });
  return part;
}

void put_shard(std::span<const float> part, const Shape& shape, const ShardSpec& s, int t, int r, std::span<float> whole) {
  if (!s.split()) {
    std::copy(part.begin(), part.end(), whole.begin());
    return;
  }
  for_each_run(shape, s, t, r, [&](int64_t w, int64_t p, int64_t n) {
    std::copy_n(part.begin() + p, n, whole.begin() + w);
  });
}

}  // namespace trainlab

namespace trainlab {

void vocab_parallel_xent(Backend& be, TensorGroup& group, const Tensor& logits, int64_t first, const Tensor& labels,
                         Tensor* dlogits, float grad_multiplier, Tensor& stats, bool accumulate_stats) {
  if (logits.rank() != 2 || labels.dtype() != DType::I32 || labels.numel() != logits.dim(0))
    throw Error("vocabulary-parallel cross-entropy: logits [N, n] and int32 labels [N] expected, got " +
                shape_str(logits.shape()) + " and " + shape_str(labels.shape()));
  const int64_t N = logits.dim(0), n = logits.dim(1);
  std::vector<float> z(static_cast<size_t>(N * n));
  std::vector<int32_t> y(static_cast<size_t>(N));
  be.download(logits, z.data(), DType::F32);
  be.download(labels, y.data(), DType::I32);
  // Row maxima, then each row's first maximum's whole-vocabulary index (as -index: a max
  // reduction finds the smallest), then sums of exp(z - max) and target logits.
  std::vector<double> mx(static_cast<size_t>(N)), arg(static_cast<size_t>(N)), sums(static_cast<size_t>(2 * N), 0.0);
  for (int64_t i = 0; i < N; ++i) {
    const float* row = z.data() + i * n;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j]);
    mx[static_cast<size_t>(i)] = m;
  }
  group.all_reduce_host(mx, true);
  for (int64_t i = 0; i < N; ++i) {
    const float* row = z.data() + i * n;
    const float m = static_cast<float>(mx[static_cast<size_t>(i)]);
    double a = -std::numeric_limits<double>::infinity();
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      if (row[j] == m && a == -std::numeric_limits<double>::infinity()) a = -static_cast<double>(first + j);
      s += std::exp(row[j] - m);
    }
    arg[static_cast<size_t>(i)] = a;
    sums[static_cast<size_t>(2 * i)] = s;
    const int64_t label = y[static_cast<size_t>(i)];
    if (label >= first && label < first + n) sums[static_cast<size_t>(2 * i + 1)] = row[label - first];
  }
  group.all_reduce_host(arg, true);
  group.all_reduce_host(sums, false);
  const float scale = grad_multiplier * be.step_scalars().loss_scale;
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float m = static_cast<float>(mx[static_cast<size_t>(i)]);
    const float s = static_cast<float>(sums[static_cast<size_t>(2 * i)]);
    const float target = static_cast<float>(sums[static_cast<size_t>(2 * i + 1)]);
    loss += static_cast<double>(std::log(s) + m - target);
    correct += -arg[static_cast<size_t>(i)] == static_cast<double>(y[static_cast<size_t>(i)]);
    if (!dlogits) continue;
    float* row = z.data() + i * n;
    const float inv = 1.0f / s;
    for (int64_t j = 0; j < n; ++j)
      row[j] = (std::exp(row[j] - m) * inv - (first + j == y[static_cast<size_t>(i)] ? 1.0f : 0.0f)) * scale;
  }
  if (dlogits) be.upload(*dlogits, z.data(), DType::F32);
  float st[2] = {static_cast<float>(loss), static_cast<float>(correct)};
  if (accumulate_stats) {
    float old[2];
    be.download(stats, old, DType::F32);
    st[0] += old[0];
    st[1] += old[1];
  }
  be.upload(stats, st, DType::F32);
}

}  // namespace trainlab
