#include "train/training_sweep.h"

#include "backend/backend.h"
#include "config/device_options.h"
#include "config/train_options.h"
#include "data/data_sources.h"
#include "train/trainer.h"

namespace trainlab {

SweepTable run_training_sweep(const Config& base, SweepOptions o, const SweepLog& log) {
  o.seed = base.get_int("train.seed");
  o.batch = base.get_int("train.batch");
  o.calibration_batches = static_cast<int>(base.get_int("quant.calibration_batches"));
  o.calibration = static_cast<int>(base.get_int("quant.calibration"));
  o.damp = base.get_float("quant.damp");
  o.act_order = base.get_bool("quant.act_order");
  o.include_output = base.get_bool("prune.include_output");
  auto be = create_backend(base.get_string("device.name"), device_options(base));
  const TrainTestSplit data = load_classification_data(data_options(base));
  const SweepTrain train = [&base, overwrite = o.overwrite](const SweepSets& sets) {
    Config c = base;
    for (const auto& [k, v] : sets) c.set(k, v);
    Trainer t(c);
    t.set_open_mode(overwrite ? RunOpenMode::Overwrite : RunOpenMode::New);
    const RunSummary s = t.run();
    return SweepTrained{s.status, s.message, s.test_accuracy, s.final_train_loss, s.steps, s.params};
  };
  return run_sweep(*be, data, o, train, log);
}

}  // namespace trainlab
