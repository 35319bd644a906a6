// The KV cache of the CPU decoder: per layer, the keys and the values of every position of the
// current window, fp32, row-major [context, dim] (head h in columns h*dim/heads .. (h+1)*dim/heads
// of a row, as the fused qkv projection produces them). A new token appends one row per layer and
// attends over rows 0..pos, so the prefix is never recomputed; a window restart (decode/generate.h)
// simply overwrites rows from position 0 again.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainlab {

class KvCache {
 public:
  KvCache(int64_t layers, int64_t context, int64_t dim);
  // Writes the key and value rows (dim floats each) of position `pos` of layer `layer`.
  void store(int64_t layer, int64_t pos, const float* key, const float* value);
  const float* keys(int64_t layer) const { return m_k[static_cast<size_t>(layer)].data(); }
  const float* values(int64_t layer) const { return m_v[static_cast<size_t>(layer)].data(); }
  // Bytes a token at position `pos` reads from the cache: keys and values of pos + 1 positions in
  // every layer, 4 bytes each.
  int64_t bytes_read(int64_t pos) const { return 2 * m_layers * (pos + 1) * m_dim * 4; }

 private:
  int64_t m_layers, m_context, m_dim;
  std::vector<std::vector<float>> m_k, m_v;  // per layer [context, dim]
};

}  // namespace trainlab
