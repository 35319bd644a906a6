#include "window_targets.h"

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QTimer>

#include "main_window.h"
#include "parallel_coords_view.h"
#include "pipeline_view.h"
#include "planner_view.h"
#include "sweep_view.h"

namespace trainlab::app {

namespace {
// The View menu's docks by --view name, as objectName()s of the window's dock widgets.
const QList<QPair<QString, QString>>& docks() {
  static const QList<QPair<QString, QString>> d = {{"kernels", "kernel_dock"}, {"roofline", "roofline_dock"},
                                                   {"text", "text_dock"},      {"ranks", "ranks_dock"},
                                                   {"system", "system_dock"}};
  return d;
}

// A window the View menu made (planner, parallel coordinates), at the main window's size.
QWidget* at_window_size(MainWindow& w, QWidget* v) {
  if (v) v->resize(w.size());
  return v;
}

// Selects the shown run in the runs table and presses its button `text` ("Tags...") or triggers the
// item of its More menu ("Rename...").
bool press_run_button(MainWindow& w, const QString& text, const QString& name, QString& error) {
  if (!w.primary_run() || w.primary_run()->dir.isEmpty()) {
    error = "--dialog " + name + ": needs a run shown (--reopen RUN_DIR)";
    return false;
  }
  for (auto* b : w.runs()->findChildren<QAbstractButton*>())
    if (b->text() == text) {
      w.runs()->select_dir(w.primary_run()->dir);
      QTimer::singleShot(0, b, &QAbstractButton::click);
      return true;
    }
  for (auto* a : w.runs()->findChildren<QAction*>())
    if (a->text() == text) {
      w.runs()->select_dir(w.primary_run()->dir);
      QTimer::singleShot(0, a, &QAction::trigger);
      return true;
    }
  error = "--dialog " + name + ": the runs table has no " + text + " button or menu item";
  return false;
}
}  // namespace

QStringList view_names() {
  QStringList n{"main"};
  for (const auto& [name, dock] : docks()) n << name;
  return n << "planner" << "sweep" << "parallel" << "pipeline";
}

QStringList dialog_names() { return {"about", "export", "tags", "rename", "open-config"}; }

QWidget* open_view(MainWindow& w, const QString& name, const QString& arg, QString& error) {
  if (name == "main") return &w;
  for (const auto& [view, dock] : docks())
    if (name == view) {
      // The named dock alone, with the room (reopening a char-gpt run opens Text generation too).
      for (const auto& [other, other_dock] : docks()) w.findChild<QDockWidget*>(other_dock)->setVisible(other == view);
      if (name == "text" && w.primary_run()) w.text_panel()->generate();  // the shown char-gpt run's weights
      return &w;
    }
  if (name == "planner") {
    w.findChild<QAction*>("action_planner")->trigger();
    return at_window_size(w, w.findChild<PlannerView*>());
  }
  if (name == "parallel") {
    w.findChild<QAction*>("action_parallel_coords")->trigger();
    return at_window_size(w, w.findChild<ParallelCoordsView*>());
  }
  if (name == "pipeline") {
    // The shown run's (--reopen RUN_DIR) measured schedule; a run without one is an error here.
    auto* v = new PipelineView(&w);
    v->setWindowFlag(Qt::Window);
    if (!w.primary_run() || w.primary_run()->dir.isEmpty() || !v->load(w.primary_run()->dir)) {
      error = "--view pipeline: " + (v->error().isEmpty() ? QString("needs a pipelined run shown (--reopen RUN_DIR)")
                                                           : v->error());
      delete v;
      return nullptr;
    }
    v->show();
    return at_window_size(w, v);
  }
  if (name == "sweep") {
    if (arg.isEmpty()) {
      error = "--view sweep needs its table: --view sweep=FILE (a sweep.csv of trainlab-cli sweep)";
      return nullptr;
    }
    SweepView* v = w.sweep_view();
    if (!v->load(arg)) {
      error = "--view sweep=" + arg + ": " + v->error();
      return nullptr;
    }
    v->show();
    return at_window_size(w, v);
  }
  error = "--view " + name + ": expected one of " + view_names().join(", ");
  return nullptr;
}

bool open_dialog(MainWindow& w, const QString& name, QString& error) {
  if (name == "about") {
    QTimer::singleShot(0, &w, [&w] { w.about(); });
    return true;
  }
  if (name == "export" || name == "open-config") {
    QAction* a = w.findChild<QAction*>(name == "export" ? "action_export_report" : "action_open_config");
    QTimer::singleShot(0, a, &QAction::trigger);
    return true;
  }
  if (name == "tags") return press_run_button(w, "Tags...", name, error);
  if (name == "rename") return press_run_button(w, "Rename...", name, error);
  error = "--dialog " + name + ": expected one of " + dialog_names().join(", ");
  return false;
}

}  // namespace trainlab::app
