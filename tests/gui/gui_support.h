// Helpers shared by the gui tests: isolated settings, a temporary runs folder, short runs made
// directly with the core Trainer (for tests that need finished run records).
#pragma once
#include <QCoreApplication>
#include <QDir>
#include <QSettings>
#include <QString>
#include <QTemporaryDir>

#include "train/trainer.h"

namespace gui_test {

inline void isolate_settings(const char* name) {
  QCoreApplication::setOrganizationName("TrainLabTests");
  QCoreApplication::setApplicationName(name);
  QSettings().clear();
}

// Trains the digits MLP for `steps` steps into root/<folder> and returns the folder.
inline QString make_run(const QString& root, const QString& folder, const std::string& precision, long steps = 60,
                        const std::string& name = "") {
  trainlab::Config c;
  c.set_json("train.steps", static_cast<int64_t>(steps));
  c.set_json("train.eval_every", static_cast<int64_t>(20));
  c.set_json("precision.dtype", precision);
  c.set_json("device.name", std::string("cpu"));
  c.set_json("run.save_weights", false);
  if (!name.empty()) c.set_json("run.name", name);
  const QString dir = QDir(root).absoluteFilePath(folder);
  c.set_json("run.out", dir.toStdString());
  trainlab::Trainer t(c);
  t.run();
  return dir;
}

}  // namespace gui_test
