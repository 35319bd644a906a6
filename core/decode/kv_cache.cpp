#include "decode/kv_cache.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace trainlab {

KvCache::KvCache(int64_t layers, int64_t context, int64_t dim)
    : m_layers(layers),
      m_context(context),
      m_dim(dim),
      m_k(static_cast<size_t>(layers), std::vector<float>(static_cast<size_t>(context * dim))),
      m_v(m_k) {}

void KvCache::store(int64_t layer, int64_t pos, const float* key, const float* value) {
  if (layer < 0 || layer >= m_layers || pos < 0 || pos >= m_context)
    throw Error("internal: KV cache row (layer " + std::to_string(layer) + ", position " + std::to_string(pos) +
                ") outside " + std::to_string(m_layers) + " layers x " + std::to_string(m_context) + " positions");
  std::copy(key, key + m_dim, m_k[static_cast<size_t>(layer)].begin() + pos * m_dim);
  std::copy(value, value + m_dim, m_v[static_cast<size_t>(layer)].begin() + pos * m_dim);
}

}  // namespace trainlab
