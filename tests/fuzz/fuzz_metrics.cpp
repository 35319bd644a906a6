// Fuzz target `metrics`: bytes of a metrics.jsonl through the reader every view uses
// (parse_metrics_jsonl, behind load_run), whole and thinned. The outcome for any bytes is rows and warnings; a row
// read back is written again (StepMetrics::to_json) as a resumed run or a report would. Only
// trainlab::Error may leave the reader; anything else (another exception, a crash, a sanitizer
// report) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "train/run_record.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const trainlab::MetricsRead r =
        trainlab::parse_metrics_jsonl(std::string_view(reinterpret_cast<const char*>(data), size), "metrics.jsonl");
    for (const auto& m : r.steps) (void)m.to_json().dump(-1, ' ', false, trainlab::Json::error_handler_t::replace);
    // The thinned read for plots (min/max per bucket of a few lines) over the same bytes.
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    for (size_t rows : {size_t(2), size_t(5)}) (void)trainlab::parse_metrics_jsonl(bytes, "metrics.jsonl", rows);
  } catch (const trainlab::Error&) {
  }
  return 0;
}
