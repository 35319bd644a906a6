// MainWindow: the menu bar (actions, shortcuts) and the About box; the rest of the window is in
// main_window.cpp.
#include "main_window.h"
#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QDockWidget>
#include <QFrame>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <fstream>
#include "backend/backend.h"
#include "data/dataset.h"
#include "lessons_view.h"
#include "parallel_coords_view.h"
#include "palette.h"
#include "pipeline_view.h"
#include "planner_view.h"
#include "report.h"
#include "sensitivity_view.h"
#include "sweep_view.h"
#include "train/run_record.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab::app {

QStringList preset_dirs();  // main_window.cpp: the folders the preset list reads

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu("&File");
  QAction* open = file->addAction("&Open config...", QKeySequence::Open, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, "Open config", preset_dirs().value(0), "Config (*.json)");
    if (!f.isEmpty()) load_preset(f);
  });
  open->setObjectName("action_open_config");
  file->addAction("&Save config...", QKeySequence::Save, this, [this] {
    const QString f = QFileDialog::getSaveFileName(this, "Save config", "preset.json", "Config (*.json)");
    if (!f.isEmpty()) save_preset(f);
  });
  file->addSeparator();
  QAction* report = file->addAction("&Export report...", QKeySequence("Ctrl+E"), this, [this] {
    QStringList d = m_runs->checked_dirs();
    if (d.isEmpty()) d = m_runs->selected_dirs();
    if (d.isEmpty() && m_primary && !m_primary->dir.isEmpty()) d << m_primary->dir;
    export_dialog(d);
  });
  report->setObjectName("action_export_report");
  file->addAction("Runs &folder...", this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, "Runs folder", m_runs->root());
    if (!d.isEmpty()) m_runs->set_root(d);
  });
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

  QMenu* run = menuBar()->addMenu("&Run");
  run->addAction(style()->standardIcon(QStyle::SP_MediaPlay), "&Start", QKeySequence("Ctrl+R"), this, [this] { start_run(); });
  run->addAction(style()->standardIcon(QStyle::SP_MediaPause), "&Pause / resume", QKeySequence("Ctrl+P"), this,
                 &MainWindow::toggle_pause);
  run->addAction(style()->standardIcon(QStyle::SP_MediaStop), "S&top", QKeySequence("Ctrl+."), this, &MainWindow::stop_run);

  QMenu* view = menuBar()->addMenu("&View");
  view->addAction("&Fit plots to data", QKeySequence("Ctrl+0"), this, [this] {
    m_plots->set_follow(true);
    m_plots->refresh();
  });
  view->addAction("&Clear overlays", this, [this] { m_runs->set_checked({}); });
  QAction* text = m_text_dock->toggleViewAction();
  text->setShortcut(QKeySequence("Ctrl+T"));
  view->addAction(text);
  QAction* kernels = m_kernel_dock->toggleViewAction();
  kernels->setShortcut(QKeySequence("Ctrl+K"));
  kernels->setToolTip("Per-kernel times of the shown run (runs with device.kernel_timing)");
  view->addAction(kernels);
  QAction* roofline = m_roofline_dock->toggleViewAction();
  roofline->setObjectName("action_roofline");
  roofline->setShortcut(QKeySequence("Ctrl+Shift+L"));
  roofline->setToolTip("The shown run's kernels by arithmetic intensity against the device's measured roofs "
                       "(runs with device.kernel_timing)");
  view->addAction(roofline);
  QAction* ranks = m_ranks_dock->toggleViewAction();
  ranks->setShortcut(QKeySequence("Ctrl+Shift+R"));
  ranks->setToolTip("Memory and time split of each rank of the shown run (runs over several ranks)");
  view->addAction(ranks);
  QAction* system = m_system_dock->toggleViewAction();
  system->setShortcut(QKeySequence("Ctrl+Shift+M"));
  system->setToolTip("CPU utilisation, and a GPU's utilisation, power and temperature (NVML), of the shown run");
  view->addAction(system);
  // The dark palette, remembered for the next start (--palette overrides it for one start).
  m_dark_action = view->addAction("&Dark palette", this, [this](bool on) {
    use_dark_palette(on);
    QSettings().setValue("view/dark_palette", on);
  });
  m_dark_action->setObjectName("action_dark_palette");
  m_dark_action->setCheckable(true);
  m_dark_action->setChecked(dark_palette_in_use());
  connect(view, &QMenu::aboutToShow, this, [this] { m_dark_action->setChecked(dark_palette_in_use()); });
  view->addSeparator();
  add_view_windows(view);

  QMenu* help = menuBar()->addMenu("&Help");
  // The worked examples of core/lessons/ (issue 22), in a window of their own made on first use.
  QAction* lessons = help->addAction("&Lessons...", this, [this] {
    auto* v = findChild<LessonsView*>();
    if (!v) {
      v = new LessonsView(this);
      v->setWindowFlag(Qt::Window);
      v->resize(1400, 860);
    }
    v->show();
    v->raise();
  });
  lessons->setObjectName("action_lessons");
  lessons->setToolTip("Textbook worked examples computed by the lab's core (trainlab-cli lesson)");
  help->addAction("&About TrainLab", this, &MainWindow::about);
  help->addAction("About &Qt", qApp, &QApplication::aboutQt);
}


// View's entries that open a window of their own, each made on first use.
void MainWindow::add_view_windows(QMenu* view) {
  // The tables of `trainlab-cli sweep` (issue 5), in a window of their own, made on first use.
  QAction* sweep = view->addAction("Compression &sweep...", QKeySequence("Ctrl+Shift+S"), this, [this] {
    SweepView* v = sweep_view();
    v->open_with_dialog();
    if (!v->rows().isEmpty()) {
      v->show();
      v->raise();
    }
  });
  sweep->setObjectName("action_compression_sweep");
  sweep->setToolTip("Plot a sweep.csv written by trainlab-cli sweep");
  // Per-layer sensitivity and the allocation of bits or sparsity (issue 20), in a window of its own
  // made on first use, starting from the shown run's weights.
  QAction* sens = view->addAction("Layer &sensitivity...", this, [this] { show_sensitivity_view(); });
  sens->setObjectName("action_sensitivity");
  sens->setToolTip("Held-out accuracy per layer and bits or sparsity, and bits or sparsity per layer under a budget "
                   "(trainlab-cli sensitivity / allocate)");
  // The memory and scale planner (issue 18), in a window of its own made on first use, starting
  // from the form's model, precision and batch.
  QAction* planner = view->addAction("Memory &planner...", QKeySequence("Ctrl+Shift+P"), this, [this] {
    auto* v = findChild<PlannerView*>();
    if (!v) {
      v = new PlannerView(this);
      v->setWindowFlag(Qt::Window);
      v->resize(1300, 850);
      try {
        v->set_from_config(m_form->config());
      } catch (const Error&) {  // a form with a bad value: the planner keeps its defaults
      }
    }
    v->show();
    v->raise();
  });
  planner->setObjectName("action_planner");
  // Many runs side by side (issue 21): the runs table's selection, else the ticked runs.
  QAction* parallel = view->addAction("Parallel &coordinates...", QKeySequence("Ctrl+Shift+C"), this, [this] {
    auto* v = findChild<ParallelCoordsView*>();
    if (!v) {
      v = new ParallelCoordsView(this);
      v->setWindowFlag(Qt::Window);
      v->resize(1200, 560);
    }
    QStringList dirs = m_runs->selected_dirs();
    if (dirs.size() < 2) dirs = m_runs->checked_dirs();
    QVector<RunRow> rows;
    for (const RunRow& r : m_runs->rows())
      if (dirs.contains(r.dir)) rows << r;
    v->set_runs(rows);
    v->show();
    v->raise();
  });
  parallel->setObjectName("action_parallel_coords");
  // A pipelined run's schedule as it ran (issue 39), from the shown run's pipeline.jsonl.
  QAction* pipeline = view->addAction("&Pipeline schedule...", this, [this] { show_pipeline_view(); });
  pipeline->setObjectName("action_pipeline");
  pipeline->setToolTip("The shown run's pipeline stages over time, step by step, beside the ideal schedule "
                       "(a run with dist.pp > 1)");
  parallel->setToolTip("Config keys against final metrics for the selected (or ticked) runs");
  planner->setToolTip("Memory per GPU and time per step of a model on a layout of GPUs (trainlab-cli plan)");
}

QString MainWindow::about_text() const {
  QStringList devices;
  for (const auto& d : available_devices()) {
    try {
      auto be = create_backend(d);
      const DeviceInfo info = be->info();
      QString line = QString::fromStdString(d + ": " + info.name).toHtmlEscaped();
      if (info.total_bytes > 0) line += " &middot; " + format_bytes(static_cast<double>(info.total_bytes));
      devices << line;
    } catch (const Error& e) {
      devices << QString::fromStdString(d).toHtmlEscaped() + " (" + QString::fromStdString(e.what()).toHtmlEscaped() + ")";
    }
  }
#ifdef TRAINLAB_CUDA_TOOLKIT
  const QString cuda = QString("CUDA toolkit %1 (the backend module loads when a GPU is used)").arg(TRAINLAB_CUDA_TOOLKIT);
#else
  const QString cuda = built_with_cuda() ? QString("built in") : QString("not built (CPU only)");
#endif
  return QString("<h3>TrainLab %1</h3><p>A desktop lab for training, compressing and measuring neural networks.</p>"
                 "<table cellspacing='0' cellpadding='4'><tr><td>Qt</td><td>%2 (built with %3)</td></tr><tr><td>CUDA</td><td>%4</td></tr>"
                 "<tr><td>Compiler</td><td>%5</td></tr><tr><td valign='top'>Devices</td><td>%6</td></tr></table>")
      .arg(TRAINLAB_VERSION, qVersion(), QT_VERSION_STR, cuda,
#if defined(__clang__)
           QString("clang ") + __clang_version__,
#elif defined(__GNUC__)
           QString("g++ ") + __VERSION__,
#else
           QString("unknown"),
#endif
           devices.join("<br>"));
}

void MainWindow::about() { QMessageBox::about(this, "About TrainLab", about_text()); }

SweepView* MainWindow::sweep_view() {
  auto* v = findChild<SweepView*>();
  if (!v) {
    v = new SweepView(this);
    v->setWindowFlag(Qt::Window);
    v->resize(1200, 800);
  }
  return v;
}

PipelineView* MainWindow::show_pipeline_view() {
  auto* v = findChild<PipelineView*>();
  if (!v) {
    v = new PipelineView(this);
    v->setWindowFlag(Qt::Window);
    v->resize(1200, 850);
  }
  if (!m_primary || m_primary->dir.isEmpty()) {
    QMessageBox::information(this, "Pipeline schedule",
                             "Show a run over pipeline stages first (a run with dist.pp > 1: Parallelism section, "
                             "or trainlab-cli train --pp 2 under mpirun).");
    return v;
  }
  if (!v->load(m_primary->dir)) {
    QMessageBox::information(this, "Pipeline schedule", v->error());
    return v;
  }
  v->show();
  v->raise();
  return v;
}

SensitivityView* MainWindow::show_sensitivity_view() {
  auto* v = findChild<SensitivityView*>();
  if (!v) {
    v = new SensitivityView(this);
    v->setWindowFlag(Qt::Window);
    v->setWindowTitle("Layer sensitivity");
    v->resize(1100, 850);
    if (m_primary && !m_primary->dir.isEmpty()) v->set_weights(m_primary->dir);
  }
  v->show();
  v->raise();
  return v;
}

}  // namespace trainlab::app
