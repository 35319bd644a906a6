#include "config/dist_options.h"

#include <algorithm>

#include "config/config.h"
#include "util/error.h"

namespace trainlab {

const char* dist_strategy_name(DistStrategy s) {
  switch (s) {
    case DistStrategy::Ddp: return "ddp";
    case DistStrategy::Zero1: return "zero1";
    case DistStrategy::Zero2: return "zero2";
    case DistStrategy::Zero3: return "zero3";
  }
  return "?";
}

DistStrategy dist_strategy_from_name(const std::string& s) {
  for (DistStrategy d : {DistStrategy::Ddp, DistStrategy::Zero1, DistStrategy::Zero2, DistStrategy::Zero3})
    if (s == dist_strategy_name(d)) return d;
  throw Error("dist.strategy '" + s + "': expected ddp, zero1, zero2 or zero3");
}

int zero_stage(DistStrategy s) {
  switch (s) {
    case DistStrategy::Ddp: return 0;
    case DistStrategy::Zero1: return 1;
    case DistStrategy::Zero2: return 2;
    case DistStrategy::Zero3: return 3;
  }
  return 0;
}

std::string dist_layout_text(const DistOptions& o, int ranks) {
  const int t = std::max(1, o.tp), p = std::max(1, o.pp), dp = std::max(1, ranks / (t * p));
  std::string s = std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + ": ";
  if (t > 1)
    s += "tensor-parallel groups of " + std::to_string(t) + (o.sequence_parallel ? " (sequence parallel)" : "") + " x ";
  s += std::to_string(dp) + " data-parallel replica" + (dp == 1 ? "" : "s");
  if (p > 1)
    s += " x " + std::to_string(p) + " pipeline stages (" + o.schedule +
         (o.virtual_stages > 1 ? ", " + std::to_string(o.virtual_stages) + " chunks a rank" : "") + ")";
  return s + ", " + dist_strategy_name(o.strategy);
}

DistOptions dist_options(const Config& c) {
  DistOptions o;
  o.strategy = dist_strategy_from_name(c.get_string("dist.strategy"));
  o.bucket_mb = c.get_float("dist.bucket_mb");
  o.ranks = static_cast<int>(c.get_int("dist.ranks"));
  o.timeout_s = c.get_float("dist.timeout_s");
  o.tp = static_cast<int>(c.get_int("dist.tp"));
  o.sequence_parallel = c.get_bool("dist.sequence_parallel");
  o.transport = c.get_string("dist.transport");
  o.pp = static_cast<int>(c.get_int("dist.pp"));
  o.schedule = c.get_string("dist.schedule");
  o.virtual_stages = static_cast<int>(c.get_int("dist.virtual_stages"));
  o.stage_layers = c.get_int_list("dist.stage_layers");
  return o;
}

}  // namespace trainlab
