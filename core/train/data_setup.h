// Loads the data set a config names and splits it (seeded, 80/20 by default for the digits;
// the IDX data sets bring their own test files).
#pragma once
#include "data/dataset.h"
#include "config/config.h"

namespace trainlab {

TrainTestSplit load_classification_data(const Config& config);

}  // namespace trainlab
