// Shared by test_lean_training and test_lean_training_gpt: one Trainer run into a temporary folder
// and what those tests read back from its record (optimizer bytes measured and predicted, the last
// validation loss), and an optimizer's settings.
#pragma once
#include <QString>
#include <filesystem>

#include "test_support.h"
#include "train/run_record.h"
#include "train/trainer.h"

namespace trainlab::test {

struct Outcome {
  RunSummary summary;
  int64_t optimizer_bytes = 0, predicted_bytes = 0;  // the last step's, from the ledger and the plan
  double val_loss = 0.0;                              // the last evaluation's
};

inline Outcome run(Config c, const std::string& dir) {
  std::filesystem::remove_all(dir);
  c.set("run.out", dir);
  Trainer t(c);
  Outcome o;
  o.summary = t.run();
  const LoadedRun r = load_run(dir);
  const auto opt = static_cast<size_t>(MemCategory::Optimizer);
  o.optimizer_bytes = r.steps.back().mem_current.by_category[opt];
  o.predicted_bytes = r.steps.back().mem_predicted.by_category[opt];
  for (const StepMetrics& s : r.steps)
    if (s.val_loss) o.val_loss = *s.val_loss;
  std::filesystem::remove_all(dir);
  return o;
}

// optim.name, optim.lr and further "key=value" settings separated by spaces.
inline void set_optimizer(Config& c, const QString& name, const QString& lr, const QString& sets = {}) {
  c.set("optim.name", name.toStdString());
  c.set("optim.lr", lr.toStdString());
  for (const QString& kv : sets.split(' ', Qt::SkipEmptyParts))
    c.set(kv.section('=', 0, 0).toStdString(), kv.section('=', 1).toStdString());
}

}  // namespace trainlab::test
