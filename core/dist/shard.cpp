#include "dist/shard.h"

#include <algorithm>

namespace trainlab::dist {

ShardRange shard_range(int64_t n, int64_t ranks, int64_t rank) {
  const int64_t s = (n + ranks - 1) / ranks;
  return {std::min(n, s * rank), std::min(n, s * (rank + 1))};
}

std::vector<int64_t> shard_counts(int64_t n, int64_t ranks, int64_t begin, int64_t end) {
  std::vector<int64_t> c(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    const ShardRange s = shard_range(n, ranks, r);
    c[static_cast<size_t>(r)] = std::max<int64_t>(0, std::min(end, s.end) - std::max(begin, s.begin));
  }
  return c;
}

}  // namespace trainlab::dist
