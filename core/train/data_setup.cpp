#include "train/data_setup.h"

namespace trainlab {

TrainTestSplit load_classification_data(const Config& c) { return load_classification_data(data_options(c)); }

}  // namespace trainlab
