// DistOptions: the dist.* config keys (config_schema.cpp, dist_keys) as the typed struct that
// core/dist and the trainer take. How a run spreads over several ranks (processes, one device
// each): the strategy that keeps the ranks' models in step, the size of the gradient buckets, the
// ranks to start on this machine, and the watchdog's timeout for a collective.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trainlab {

class Config;

// ddp: every rank holds the whole model and optimizer; gradients are summed over the ranks.
// zero1: the optimizer state is sharded (each rank updates its shard of the parameters, then the
// ranks all-gather them); zero2: gradients too; zero3: parameters too (gathered layer by layer).
enum class DistStrategy : uint8_t { Ddp, Zero1, Zero2, Zero3 };
const char* dist_strategy_name(DistStrategy s);             // "ddp", "zero1", "zero2", "zero3"
DistStrategy dist_strategy_from_name(const std::string& s);  // throws Error naming the four
// 0 for ddp, else the ZeRO stage.
int zero_stage(DistStrategy s);

struct DistOptions {
  DistStrategy strategy = DistStrategy::Ddp;  // dist.strategy
  double bucket_mb = 25.0;                    // dist.bucket_mb: MiB of gradients per bucket
  int ranks = 0;                              // dist.ranks: 0 = as launched (1 without a launcher)
  double timeout_s = 300.0;                   // dist.timeout_s: the longest wait for one collective
  int tp = 1;                                 // dist.tp: tensor-parallel degree
  bool sequence_parallel = false;             // dist.sequence_parallel (with tp > 1)
  std::string transport = "auto";             // dist.transport: auto, nccl or mpi
  int pp = 1;                                 // dist.pp: pipeline-parallel degree (stages)
  std::string schedule = "1f1b";              // dist.schedule: gpipe, 1f1b, interleaved, zb-h1
  int virtual_stages = 1;                     // dist.virtual_stages: chunks per pipeline rank
  std::vector<int64_t> stage_layers;          // dist.stage_layers: blocks per (virtual) stage; empty: balanced
  bool operator==(const DistOptions&) const = default;
};

DistOptions dist_options(const Config& config);

// A run's layout over `ranks` ranks in words, for the CLI, the summary, the Ranks dock and the
// report: "2 ranks: tensor-parallel groups of 2 (sequence parallel) x 1 data-parallel replica, ddp",
// "4 ranks: 4 data-parallel replicas, zero2" or "8 ranks: tensor-parallel groups of 2 x 2 data-parallel
// replicas x 2 pipeline stages (1f1b), zero1".
std::string dist_layout_text(const DistOptions& o, int ranks);

}  // namespace trainlab
