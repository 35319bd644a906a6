// The held-out data that sensitivity and allocation (compress/sensitivity.h) measure on, from the
// run config stored in a weights file, as `trainlab-cli sensitivity` / `allocate` and the app's
// Sensitivity view pick it.
//
//   classification, "validation" (the default): the last 20% of the run's training split. The
//     model has seen it in training, so its figures are optimistic, but choosing on it keeps the
//     test split (what the allocation is judged by) out of the choice; the data sets have no
//     third split to hold out instead;
//   classification, "test": the test split (what `trainlab-cli eval` reports; choosing on it is
//     selecting on the test set, shown so in the description);
//   char-gpt: its validation windows (the text has no third split), `windows` of them.
// `test` is always what `trainlab-cli eval` reports for a file (the test split; char-gpt: the
// run's validation windows).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "compress/ptq_methods.h"
#include "compress/sensitivity.h"
#include "config/config.h"

namespace trainlab {

class Backend;

struct HeldOutData {
  std::string description;  // "validation: the last 20% of the training split (287 samples)"
  FileEvaluator eval;       // on the held-out data
  FileEvaluator test;       // what `trainlab-cli eval` reports
  // gptq / awq calibration data of a weights file: n batches of train.batch rows from the start of
  // the training split (before the held-out 20 %), or n windows of the training text.
  std::function<CalibrationSet(const SafeTensorsFile& f, int n)> calibration;
};

// Throws Error naming the choice for a split other than validation or test. The evaluators keep
// `be` (which must outlive them) and their data.
HeldOutData held_out_data(Backend& be, const Config& run_config, const std::string& split, const std::string& path,
                          int64_t text_windows = 32);

}  // namespace trainlab

namespace trainlab {

// What `trainlab-cli allocate` and the app's Sensitivity view ask for.
struct AllocateRequest {
  SensitivityOptions options;  // only the budget's kind (bits or sparsity) is measured
  AllocationBudget budget;
  std::string split = "validation";
  std::string out;  // the allocated weights file ("" = none)
  int64_t text_windows = 32;
  PtqMethodOptions method;  // how the allocation's quantized files are made (rtn, gptq, awq)
  int calibration = 16;     // gptq / awq: batches or windows of the training split (quant.calibration)
};

// Measures the sensitivity table on the held-out data, allocates (compress/sensitivity.h), writes
// the kept allocation to r.out, and reports both allocations' held-out and test figures (the test
// figures are what `trainlab-cli eval` prints for the file) with the table.
nlohmann::json allocation_report(Backend& be, const SafeTensorsFile& fp32, const std::string& path, const Config& run_config,
                                 const AllocateRequest& r);

}  // namespace trainlab
