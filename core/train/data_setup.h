// The data set a Config names: data_options(config) into data/data_sources.h. Kept for the
// commands that still hold a whole Config (eval, quantize, sweep); new code passes DataOptions.
#pragma once
#include "config/config.h"
#include "data/data_sources.h"

namespace trainlab {

TrainTestSplit load_classification_data(const Config& config);

}  // namespace trainlab
