// The one split of the flat parameter layout (nn/flat_params.h) over data-parallel ranks, used
// by ZeRO (dist/zero.cpp), by the planner's per-rank memory (plan/memory_model.h,
// zero_shard_range) and by the checkpoints of a sharded run (train/run_shards.h): rank r of W
// owns [r S, (r+1) S) of the n elements, S = ceil(n / W), cut at n (the last shards shorter, or
// empty when W does not fit n). Megatron-LM's distributed optimizer splits alike.
#pragma once
#include <cstdint>
#include <vector>

namespace trainlab::dist {

// A range [begin, end) of the flat layout.
struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const ShardRange&) const = default;
};

// Rank `rank`'s shard of n elements over `ranks` ranks (ranks >= 1, 0 <= rank < ranks).
ShardRange shard_range(int64_t n, int64_t ranks, int64_t rank);
// The elements of [begin, end) in each rank's shard (reduce-scatter and all-gather counts).
std::vector<int64_t> shard_counts(int64_t n, int64_t ranks, int64_t begin, int64_t end);

}  // namespace trainlab::dist
