// Checkpoints of a run whose fp32 master weights and optimizer state are sharded over its ranks
// (ZeRO, dist/data_parallel.h), beside train/run_checkpoint.h's checkpoint.json and tensors file
// (rank 0's: everything else). Each rank r of W writes its range [begin, end) of the flat layout
// (dist/shard.h) as checkpoint-<step>-shard<r>of<W>.safetensors with the F32 tensors "master" and
// "optim/<buffer>" (Optimizer::save_state's names), atomically (io/safetensors.h through
// util/safe_file.h); rank 0 then writes checkpoint.json with the layout:
//
//   "shards": {"world_size": W, "strategy": "zero2", "elements": N,
//              "files": [{"rank": r, "begin": b, "end": e, "file": name, "bytes": B, "crc32": C}, ...]}
//
// The files cover [0, N) in rank order, without gaps. A resume at any number of ranks reshards:
// each rank reads, for its new range, only the overlapping parts of the old files (ZeRO: its new
// shard; DDP or one rank: everything). A file read whole has its size and CRC-32 checked; a file
// read in part its size and its header (dtype, shape, offsets), since a CRC-32 would need every
// byte of it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dist/data_parallel.h"
#include "dist/shard.h"
#include "optim/optimizer.h"
#include "config/config.h"

namespace trainlab {

struct ShardFile {
  int rank = 0;
  int64_t begin = 0, end = 0;
  std::string file;  // checkpoint-<step>-shard<r>of<W>.safetensors, inside the run folder
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

struct ShardLayout {
  int world_size = 1;
  std::string strategy;  // dist.strategy of the run that wrote it
  int64_t elements = 0;  // N, the flat layout's length
  std::vector<ShardFile> files;
};

Json shard_layout_json(const ShardLayout& layout);
// checkpoint.json's "shards", checked field by field: Error "<where>: <field>: expected ...".
ShardLayout parse_shard_layout(const Json& j, const std::string& where);
// A shard file name this module writes (nothing that leaves the run folder).
bool is_shard_file_name(const std::string& name);

// Collective: every rank of `dp` writes its shard of the masters and of `opt`'s state after
// `step` steps into `dir`. Returns the layout on every rank; throws Error on every rank when any
// rank could not write its file (the previous checkpoint then stays in use).
ShardLayout write_state_shards(const std::string& dir, long step, dist::DataParallel& dp, const Optimizer& opt);

// The masters and optimizer state of `range` (fp32, range.size() values each).
struct StateSlice {
  std::vector<float> master;
  std::map<std::string, std::vector<float>> optim;  // empty: saved before the first update
};
// Reads `range` of the layout's files in `dir`; throws Error naming the file and what does not fit.
StateSlice read_state_slice(const std::string& dir, const ShardLayout& layout, dist::ShardRange range);

}  // namespace trainlab
