// Fuzz target `checkpoint`: the bytes of a run checkpoint's checkpoint.json through everything that
// reads it before any tensor is touched (train/run_checkpoint.h): the field checks of
// parse_run_checkpoint, the config it holds (Config::from_json), the loss scaler's restore; and the
// same bytes as a metrics.jsonl cut back to a step for `train --resume` (metrics_bytes_to_keep).
// A trainlab::Error is the clear-error outcome; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "optim/loss_scaler.h"
#include "train/run_checkpoint.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const trainlab::RunCheckpointInfo c = trainlab::parse_run_checkpoint(bytes, "checkpoint.json");
    if (c.progress.step < 1 || c.progress.step >= c.progress.total_steps) __builtin_trap();
    trainlab::Config::from_json(c.config, "checkpoint.json (its config)");
    trainlab::LossScaler scaler(65536.0, 2000, true);
    scaler.restore(c.loss_scaler);
  } catch (const trainlab::Error&) {
  }
  long last = -1;
  const long step = static_cast<long>(size % 7);
  const std::size_t keep = trainlab::metrics_bytes_to_keep(bytes, step, last);
  // The cut is at the start or just after a newline, and the last step kept is at most `step`.
  if (keep > size || (keep > 0 && bytes[keep - 1] != '\n') || last < 0 || last > step) __builtin_trap();
  return 0;
}
