// The measured pipeline timeline of a run over pipeline stages (dist.pp > 1): pipeline.jsonl in the
// run folder (docs/RUN_RECORD.md), one line per recorded step (pipeline_timeline_due), written by
// rank 0 from every stage's measured actions (train/pipeline_executor.h), beside what the schedule
// predicts at unit costs (dist::simulate) and the closed form (dist::pipeline_bubble).
//
// A line: {"step", "schedule", "p", "m", "v", "simulated_bubble", "formula_bubble", "stages": [per
// stage {"stage", "rank", "step_ms", "forward_ms", "backward_ms", "recv_wait_ms", "bubble",
// "actions": [[op letter F/B/W, micro-batch, chunk, start_ms, end_ms], ...]}]}, times in
// milliseconds from the stage's step start (the stage's replica 0 when there are several).
#pragma once
#include <string>
#include <vector>

#include "dist/pipeline_schedule.h"
#include "config/config.h"  // Json

namespace trainlab {

// One stage's measured step (milliseconds): computing forwards (with the loss on the last stage)
// and backwards, waiting for received activations or gradients, and the bubble, the share of the
// step not computing (1 - (forward + backward) / step).
struct PipelineStageTimes {
  int stage = 0, rank = 0;
  double step_ms = 0, forward_ms = 0, backward_ms = 0, recv_wait_ms = 0, bubble = 0;
};

// One recorded step: the layout, the predictions and the measured timeline (`timing`: per stage
// the actions in list order with start and end in ms; makespan the longest stage step, idle and
// idle_fraction from the measured busy times, peak_in_flight left empty).
struct PipelineStepRecord {
  long step = 0;
  std::string schedule;
  int p = 1, m = 1, v = 1;
  double simulated_bubble = 0, formula_bubble = 0;
  std::vector<PipelineStageTimes> stages;
  dist::PipelineTiming timing;
};

// Whether step `step` (from 1) goes into pipeline.jsonl: the first 8 steps, then every 50th.
bool pipeline_timeline_due(long step);
// Appends `line` (one JSON object) to run_dir/pipeline.jsonl; throws Error naming the file.
void append_pipeline_line(const std::string& run_dir, const Json& line);
// The lines of run_dir/pipeline.jsonl, in order (empty when the file is absent: a run without a
// pipeline). Throws Error naming the file, the line and the field for a malformed line.
std::vector<PipelineStepRecord> read_pipeline_timeline(const std::string& run_dir);

}  // namespace trainlab
