// Fuzz target `steps`: bytes of a steps.bin (train/step_columns.h) through its reader, whole and thinned,
// then merged with metrics.jsonl rows as load_run does. The outcome for any bytes is rows and
// warnings; only trainlab::Error may leave the reader (it throws none for the bytes' sake).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "train/step_columns.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const trainlab::StepColumnsRead r = trainlab::parse_step_columns(bytes, "steps.bin");
    std::vector<trainlab::StepMetrics> lines(2);
    lines[0].step = 1;
    lines[1].step = r.rows.empty() ? 2 : r.rows.back().step;
    for (size_t rows : {size_t(0), size_t(2), size_t(5)}) {
      const trainlab::StepRowsWanted want{rows, {std::min(lines[0].step, lines[1].step), std::max(lines[0].step, lines[1].step)}};
      const trainlab::StepColumnsRead thinned = trainlab::parse_step_columns(bytes, "steps.bin", want);
      for (const auto& m : trainlab::merge_step_rows(lines, thinned.rows))
        (void)m.to_json().dump(-1, ' ', false, trainlab::Json::error_handler_t::replace);
    }
  } catch (const trainlab::Error&) {
  }
  return 0;
}
