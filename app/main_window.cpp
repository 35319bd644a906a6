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
#include <cstdio>
#include <cstring>
#include <cmath>
#include <fstream>

#include "backend/backend.h"
#include "data/dataset.h"
#include "lessons_view.h"
#include "palette.h"
#include "report.h"
#include "sweep_view.h"
#include "train/run_checkpoint.h"
#include "train/run_record.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab::app {

namespace {
// run.out holds a run (finished, or stopped / killed): asks before replacing it, and clears the old
// run's own files when the user agrees (train/run_record.h). False when the user declines. Folders
// the core refuses anyway (in use, files a run did not write, links) are left to its message.
bool confirm_overwrite(QWidget* parent, const std::string& dir) {
  const RunFolderInfo info = inspect_run_folder(dir);
  if (!info.holds_run || info.in_use || !info.foreign.empty() || !info.link.empty()) return true;
  const QString what = info.status.empty() ? QString("an unfinished run") : "a run (" + QString::fromStdString(info.status) + ")";
  const auto a = QMessageBox::question(parent, "Overwrite run",
                                       QString("The run folder %1 holds %2. Replace it with the new run? Its config, "
                                               "metrics, summary and weights are deleted.")
                                           .arg(QDir::toNativeSeparators(QString::fromStdString(dir)), what),
                                       QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
  if (a != QMessageBox::Yes) return false;
  clear_run_folder(dir);
  return true;
}
}  // namespace

QStringList preset_dirs() {
  QStringList d;
  for (const auto& r : resource_roots()) {
    const QString p = QString::fromStdString(r) + "/presets";
    if (QDir(p).exists() && !d.contains(QDir(p).absolutePath())) d << QDir(p).absolutePath();
  }
  return d;
}

MainWindow::MainWindow(const QString& runs_root, QWidget* parent) : QMainWindow(parent) {
  setWindowTitle("TrainLab");
  try {
    const QString icon = QString::fromStdString(find_resource("icons/trainlab-256.png"));
    setWindowIcon(QIcon(icon));
  } catch (const Error&) {
  }
  m_session = new TrainingSession(this);
  build_ui();
  build_menus();
  connect(m_session, &TrainingSession::metrics_ready, this, &MainWindow::on_metrics);
  connect(m_session, &TrainingSession::notice, this, [this](const QString& t) {
    // The notices of a run's start (the CPU fallback's, the device measurement's) stay together,
    // and a first run's hint stays under them rather than being replaced.
    const bool hint_shown = message_text().contains(first_run_hint().section(':', 0, 0));
    if (!m_run_notices.contains(t)) m_run_notices << t;
    const QString all = m_run_notices.join("\n");
    show_message(t.startsWith("setting not applied") ? "warning" : "info", hint_shown ? all + "\n" + first_run_hint() : all);
  });
  connect(m_session, &TrainingSession::finished, this, &MainWindow::on_finished);
  // What a switched model or optimizer changed in the controls, and which of the user's it kept.
  connect(m_form, &ConfigForm::defaults_applied, this, [this](const QString& line) { show_message("info", line); });
  connect(m_form, &ConfigForm::live_changed, this, [this](const QString& key, const QString& value) {
    if (!m_session->running()) return;
    m_session->set(key.toStdString(), Json::parse(value.toStdString()));
    statusBar()->showMessage(key + " -> " + value + " at the next step", 5000);
  });
  connect(m_runs, &RunsPanel::overlay_changed, this, &MainWindow::update_overlays);
  connect(m_runs, &RunsPanel::reopen_requested, this, &MainWindow::reopen);
  connect(m_runs, &RunsPanel::resume_requested, this, &MainWindow::resume_run);
  connect(m_runs, &RunsPanel::export_requested, this, &MainWindow::export_dialog);
  connect(m_runs, &RunsPanel::renamed, this, [this](const QString& dir, const QString& name) {
    for (const auto& r : {m_cache.value(dir), m_live, m_primary})  // the series the plots draw
      if (r && r->dir == dir && r->config.is_object()) {
        r->config["run"]["name"] = name.toStdString();
        r->name = RunSeries::display_name(r->config, dir);
      }
    update_plots();  // the legends take the new name
  });

  QSettings s;
  QString root = runs_root;
  if (root.isEmpty()) root = qEnvironmentVariable("TRAINLAB_RUNS_DIR");
  if (root.isEmpty()) root = s.value("runs/root").toString();
  if (root.isEmpty()) root = QDir::current().absoluteFilePath("runs");
  m_runs->set_root(root);
  connect(m_runs, &RunsPanel::root_changed, this, [](const QString& d) { QSettings().setValue("runs/root", d); });
  connect(m_runs, &RunsPanel::baseline_changed, this, [](const QString& d) { QSettings().setValue("runs/baseline", d); });
  restore_settings();
  update_buttons();
}

// The run ends and its record is written before any part of the window goes; the window stops
// listening first, so the session's last signals reach no half-destroyed widget.
MainWindow::~MainWindow() {
  m_session->disconnect(this);
  m_session->shutdown();
}

void MainWindow::fill_presets() {
  m_presets->clear();
  m_presets->addItem("(choose a preset)", QString());
  QStringList dirs = preset_dirs();
  dirs << QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/presets";
  for (const auto& d : dirs)
    for (const QFileInfo& fi : QDir(d).entryInfoList({"*.json"}, QDir::Files, QDir::Name))
      m_presets->addItem(fi.completeBaseName(), fi.absoluteFilePath());
}

void MainWindow::prepare_first_launch() {
  for (const QString& d : preset_dirs())
    if (QFile::exists(d + "/digits-first-run.json")) {
      load_preset(d + "/digits-first-run.json");
      break;
    }
  m_first_run_hint = true;
}

QString MainWindow::first_run_hint() {
  return "While it trains, try one change: set Precision to bf16 (or Pruning to gradual). It applies at the "
         "next step and leaves a marker on every plot, so you see what it does to loss, speed and memory.";
}

bool MainWindow::load_preset(const QString& path) {
  try {
    const Config c = Config::from_file(path.toStdString());
    m_form->set_config(c);
    statusBar()->showMessage("Loaded " + QFileInfo(path).fileName(), 4000);
    return true;
  } catch (const Error& e) {
    show_message("error", "This config file cannot be used: " + QString::fromStdString(e.what()));
    return false;
  }
}

bool MainWindow::save_preset(const QString& path) {
  try {
    const Config c = m_form->config();
    // Only what differs from the defaults, plus the essentials: short, readable presets.
    const Config defaults;
    const Json full = flatten_config(c.to_json());
    Json out = Json::object();
    for (const auto& k : config_schema()) {
      const bool essential = k.key == "model.name" || k.key == "data.name" || k.key == "precision.dtype";
      if (essential || c.at(k.key) != defaults.at(k.key)) {
        std::string p = "/" + k.key;
        for (auto& ch : p)
          if (ch == '.') ch = '/';
        out[Json::json_pointer(p)] = c.at(k.key);
      }
    }
    std::ofstream f(path.toStdString(), std::ios::trunc);
    if (!f) throw Error(path.toStdString() + ": cannot write");
    f << out.dump(2) << "\n";
    if (!f) throw Error(path.toStdString() + ": write failed");
    fill_presets();
    statusBar()->showMessage("Saved " + path, 4000);
    return true;
  } catch (const Error& e) {
    show_message("error", QString::fromStdString(e.what()));
    return false;
  }
}

std::string MainWindow::key_in_message(const QString& msg) const {
  for (const auto& k : config_schema())
    if (msg.contains(QString::fromStdString(k.key))) return k.key;
  const Json p = m_form->value("data.path");
  if (p.is_string() && !p.get<std::string>().empty() && msg.contains(QString::fromStdString(p.get<std::string>())))
    return "data.path";
  return {};
}

bool MainWindow::start_run() {
  if (m_session->running()) return false;
  Config c;
  try {
    c = m_form->config();
    // IDX data sets: Fashion-MNIST from where it was found, and a clear message for a folder that
    // holds only part of the four files (before a run folder is made).
    const std::string data = c.get_string("data.name");
    const bool classifier = c.get_string("model.name") != "char-gpt";
    if (classifier && (data == "fashion-mnist" || data == "idx")) {
      if (data == "fashion-mnist" && c.get_string("data.path").empty()) {
        if (m_form->fashion_mnist_dir().isEmpty()) {
          std::string where;
          for (const auto& d : fashion_mnist_dirs()) where += (where.empty() ? "" : ", ") + d;
          throw Error("data.name: Fashion-MNIST is not installed (looked in " + where +
                      "). Install the package dataset-fashion-mnist, or choose a folder of IDX files for data.path.");
        }
        c.set_json("data.path", m_form->fashion_mnist_dir().toStdString());
      }
      if (c.get_string("data.path").empty()) throw Error("data.path: data.name=idx needs a folder of IDX files");
      check_idx_folder(c.get_string("data.path"));
    }
    if (c.get_string("run.out").empty()) {
      const std::string tag = c.get_string("model.name") + "-" + c.get_string("precision.dtype");
      c.set_json("run.out", RunRecord::default_dir(m_runs->root().toStdString(), tag));
    } else if (!confirm_overwrite(this, c.get_string("run.out"))) {
      return false;
    }
  } catch (const Error& e) {
    const QString msg = QString::fromStdString(e.what());
    show_message("error", "Cannot start: " + msg);
    const std::string key = key_in_message(msg);
    if (!key.empty()) m_form->highlight(key);
    return false;
  }
  if (!m_session->start(c)) return false;
  m_message->hide();
  m_run_notices.clear();
  if (m_first_run_hint) {  // once, on the first run of the first start
    m_first_run_hint = false;
    show_message("info", first_run_hint());
  }
  m_live = std::make_shared<RunSeries>();
  m_live->dir = QDir(QString::fromStdString(c.get_string("run.out"))).absolutePath();
  m_live->config = c.to_json();
  m_live->name = RunSeries::display_name(m_live->config, m_live->dir);
  m_live->color = run_color(0);
  m_primary = m_live;
  m_system->clear();
  m_runs->set_live_dir(m_live->dir);
  update_plots();
  m_form->set_running(true);
  m_progress->setRange(0, 0);  // busy until the first step says how many
  m_progress->setFormat("starting...");
  m_status->setText("Starting " + m_live->name + " ...");
  update_buttons();
  return true;
}

bool MainWindow::resume_run(const QString& dir) {
  if (m_session->running()) return false;
  Config c;
  long from = 0;
  LoadedRun before;
  try {
    c = resume_config(dir.toStdString());
    from = read_run_checkpoint(dir.toStdString())->progress.step;
    before = load_run(dir.toStdString());
  } catch (const Error& e) {
    show_message("error", "Cannot resume " + QDir::toNativeSeparators(dir) + ": " + QString::fromStdString(e.what()));
    return false;
  }
  m_message->hide();
  m_run_notices.clear();
  m_live = std::make_shared<RunSeries>();
  m_live->dir = QDir(dir).absolutePath();
  m_live->config = c.to_json();
  m_live->name = RunSeries::display_name(m_live->config, m_live->dir);
  m_live->color = run_color(0);
  m_system->clear();
  for (const StepMetrics& m : before.steps)  // the steps the checkpoint keeps; the run continues after them
    if (m.step <= from) {
      m_live->append(m);
      m_system->append(m);
    }
  m_primary = m_live;
  Config shown = c;
  shown.set_json("run.out", std::string());  // a run started later from the controls gets a new folder
  m_form->set_config(shown);
  m_runs->set_live_dir(m_live->dir);
  update_plots();
  m_session->start_resumed(c, m_live->dir);
  m_form->set_running(true);
  m_progress->setRange(0, 0);
  m_progress->setFormat("resuming...");
  m_status->setText(QString("Resuming %1 at step %2 ...").arg(m_live->name).arg(from));
  update_buttons();
  return true;
}

void MainWindow::stop_run() {
  if (!m_session->running()) return;
  m_session->stop();
  m_status->setText("Stopping at the next step...");
}

void MainWindow::toggle_pause() {
  if (!m_session->running()) return;
  if (m_session->paused()) {
    m_session->resume();
    m_progress->setFormat("step %v / %m");
  } else {
    m_session->pause();
    m_progress->setFormat("paused at step %v / %m");
  }
  update_buttons();
}

void MainWindow::on_metrics() {
  const auto batch = m_session->take_pending();
  if (batch.empty() || !m_live) return;
  for (const auto& m : batch) {
    m_live->append(m);
    m_system->append(m);
  }
  if (!m_system_dock->isHidden() && m_primary == m_live) m_system->refresh();
  const StepMetrics& m = batch.back();
  if (m_progress->maximum() != m.total_steps) {
    m_progress->setRange(0, static_cast<int>(std::min<long>(m.total_steps, INT_MAX)));
    m_progress->setFormat(m_session->paused() ? "paused at step %v / %m" : "step %v / %m");
  }
  m_progress->setValue(static_cast<int>(std::min<long>(m.step, INT_MAX)));
  QString s = QString("epoch %1 · loss %2 · train acc %3 % · %4 · %5 %6")
                  .arg(m.epoch, 0, 'f', 2)
                  .arg(m.loss, 0, 'g', 4)
                  .arg(100 * m.train_accuracy, 0, 'f', 1)
                  .arg(QString::fromStdString(m.precision))
                  .arg(QLocale::system().toString(m.samples_per_s, 'f', 0), m_live->throughput_unit());
  if (!m_live->val_acc.isEmpty()) s += QString(" · val acc %1 %").arg(100 * m_live->val_acc.back(), 0, 'f', 1);
  m_status->setText(s);
  m_plots->notify_data();
  if (m_kernel_dock->isVisible() && m_primary == m_live) m_kernels->refresh();
  if (m_roofline_dock->isVisible() && m_primary == m_live) m_roofline->refresh();
  if (m_primary == m_live && m_live->has_ranks()) show_ranks();
}

// The ranks dock of the shown run when it ran over several ranks (live, or reopened: there was no
// live run then, and reading its folder crashed the window): shown once a run (closed by the
// user, it stays closed), and redrawn from the run's latest figures.
void MainWindow::show_ranks() {
  if (m_ranks_opened_for != m_primary->dir) {
    m_ranks_opened_for = m_primary->dir;
    m_ranks_dock->show();
  }
  m_ranks->refresh();
}

void MainWindow::on_finished(const QString& status, const QString& message, const QString& dir) {
  on_metrics();  // the last steps
  m_form->set_running(false);
  QStringList restored;  // live keys changed during the run, set back to its start values
  if (m_live) restored = m_form->restore_start_values(Config::from_record(m_live->config));
  m_progress->setRange(0, 1);
  m_progress->setValue(status == "completed" ? 1 : 0);
  m_progress->setFormat(status);
  m_runs->set_live_dir({});
  if (m_live) {
    QFile f(dir + "/summary.json");
    if (f.open(QIODevice::ReadOnly)) {
      try {
        m_live->summary = Json::parse(f.readAll().toStdString());
      } catch (const std::exception&) {
      }
    }
    m_cache.remove(m_live->dir);
    // A character model that wrote its weights is what text generation offers next (issue 21).
    if (flatten_config(m_live->config).value("model.name", std::string()) == "char-gpt" &&
        QFile::exists(dir + "/model.safetensors")) {
      m_text->set_weights(dir);
      m_text_dock->show();
    }
  }
  m_plots->refresh();
  const QString where = dir.isEmpty() ? QString() : "\nThe run record is kept in " + QDir::toNativeSeparators(dir) + ".";
  if (status == "completed") {
    const double acc = m_live ? summary_number(m_live->summary, "test_accuracy") : std::nan("");  // NaN: no value
    m_status->setText("Finished: test accuracy " + number_text(100 * acc, 'f', 2, " %") + ".");
    statusBar()->showMessage("Run finished: " + dir, 8000);
  } else if (status == "stopped") {
    m_status->setText("Stopped. " + message);
    show_message("info", "Run stopped: " + message + "." + where);
  } else if (status == "diverged") {
    m_status->setText("Diverged.");
    show_message("error", "The run diverged: " + message +
                              ". Lower the learning rate (Optimizer → Lr) or use a warm-up, then start again." + where);
    m_form->highlight("optim.lr");
  } else {
    m_status->setText("Failed.");
    const std::string key = key_in_message(message);
    QString hint;
    if (message.contains("out of memory", Qt::CaseInsensitive))
      hint = "";
    else if (!key.empty())
      hint = " Fix the highlighted setting (" + QString::fromStdString(key) + ") and start again.";
    else
      hint = " Check the settings and start again.";
    show_message("error", "The run could not " + QString(m_live && m_live->size() ? "continue" : "start") + ": " + message +
                              "." + hint + (QDir(dir).exists() ? where : QString()));
    if (!key.empty()) m_form->highlight(key);
  }
  m_runs->reload();
  if (m_live && QFile::exists(m_live->dir + "/config.json")) m_runs->select_dir(m_live->dir);
  if (m_live && m_live->size() == 0 && m_primary == m_live) {
    m_primary.reset();  // a run that trained no step has nothing to plot: no legend entries left behind
    update_plots();
  }
  if (!restored.isEmpty())
    statusBar()->showMessage("The controls show the run's start settings again (changed during it: " +
                                 restored.join("; ") + ")", 15000);
  update_buttons();
}

std::shared_ptr<RunSeries> MainWindow::load_cached(const QString& dir) {
  auto it = m_cache.find(dir);
  if (it != m_cache.end() && (*it)->summary.is_object()) return *it;
  // Plots of a long record read it thinned (min/max per bucket of steps; bench_record_load times
  // it); reports and CSV read every row.
  constexpr size_t kPlotRows = 100000;
  auto r = std::make_shared<RunSeries>(RunSeries::load(dir, kPlotRows));
  m_cache[dir] = r;
  if (!r->warnings.isEmpty()) show_message("warning", r->name + ": " + r->warnings.join("\n"));  // lines skipped
  return r;
}

void MainWindow::update_overlays(const QStringList& dirs) {
  m_overlay_dirs = dirs;
  QSettings().setValue("runs/overlays", dirs);
  update_plots();
}

void MainWindow::update_plots() {
  QVector<std::shared_ptr<RunSeries>> list;
  if (m_primary) list << m_primary;
  for (const auto& d : m_overlay_dirs) {
    if (m_primary && d == m_primary->dir) continue;
    try {
      list << load_cached(d);
    } catch (const Error& e) {
      show_message("warning", "Cannot overlay " + d + ": " + QString::fromStdString(e.what()));
    }
  }
  for (int i = 0; i < list.size(); ++i) list[i]->color = run_color(i);
  m_plots->set_runs(list);
  m_kernels->set_run(m_primary);
  m_roofline->set_run(m_primary);
  m_ranks->set_run(m_primary);
  if (m_primary && m_primary->has_ranks()) show_ranks();
}

void MainWindow::reopen(const QString& dir) {
  try {
    std::shared_ptr<RunSeries> r;
    if (m_live && m_live->dir == dir)
      r = m_live;
    else
      r = load_cached(dir);
    m_primary = r;
    if (!m_session->running()) {
      Config c = Config::from_record(r->config);
      c.set_json("run.out", std::string());  // a new run gets a new folder
      m_form->set_config(c);
    }
    update_plots();
    if (!m_system_dock->isHidden()) {
      if (r == m_live)
        m_system->refresh();
      else
        m_system->show_run(dir);
    }
    if (flatten_config(r->config).value("model.name", std::string()) == "char-gpt") {
      m_text->set_weights(dir);
      m_text_dock->show();
    }
    QSettings().setValue("runs/last", dir);
    statusBar()->showMessage("Reopened " + r->name + (m_session->running() ? "" : "; its settings are in the controls"), 5000);
  } catch (const Error& e) {
    show_message("error", "Cannot reopen " + dir + ": " + QString::fromStdString(e.what()));
  }
}

void MainWindow::export_dialog(const QStringList& dirs_in) {
  QStringList dirs = dirs_in;
  if (dirs.isEmpty() && m_primary && QFile::exists(m_primary->dir + "/config.json")) dirs << m_primary->dir;
  if (dirs.isEmpty()) {
    show_message("info", "Select or tick the runs to export in the runs table first.");
    return;
  }
  QString start = m_last_export_dir.isEmpty() ? QDir::homePath() : m_last_export_dir;
  QString sel;
  const QString f = QFileDialog::getSaveFileName(this, "Export report", start + "/trainlab-report.pdf",
                                                 "PDF report (*.pdf);;HTML report (*.html);;Metrics CSV (*.csv)", &sel);
  if (f.isEmpty()) return;
  m_last_export_dir = QFileInfo(f).absolutePath();
  if (export_report(dirs, f)) statusBar()->showMessage("Exported " + f, 6000);
}

bool MainWindow::export_report(const QStringList& dirs, const QString& path) {
  QApplication::setOverrideCursor(Qt::WaitCursor);
  bool ok = true;
  try {
    Report report = Report::from_dirs(dirs);
    if (const auto* lessons = findChild<LessonsView*>()) report.set_lesson_values(lessons->values());
    report.write(path);
  } catch (const Error& e) {
    show_message("error", "Export failed: " + QString::fromStdString(e.what()));
    ok = false;
  } catch (const std::exception& e) {
    show_message("error", "Export failed: " + QString::fromStdString(describe_exception(e, "writing the report")));
    ok = false;
  }
  QApplication::restoreOverrideCursor();
  return ok;
}

void MainWindow::show_message(const QString& kind, const QString& text) {
  m_message_kind = kind;
  style_message_bar();
  // Icons every desktop font has (DejaVu Sans, Noto): U+2139 information source, U+26A0 warning sign.
  // (U+24D8, a circled i, is in none of Debian's default fonts: a box was shown instead.)
  const QString icon = kind == "info" ? "&#8505;" : "&#9888;";
  m_message_label->setText("<b>" + icon + "</b> " + text.toHtmlEscaped().replace("\n", "<br>"));
  m_message->show();
  statusBar()->showMessage(text.section('\n', 0, 0), 10000);
}

// The kind's accent (blue, amber, red) draws the border and tints the palette's window colour for
// the background; the text takes the palette's colour: a light bar on the light palette, a dark one
// on the dark palette (the bar's fixed light colours stayed light there).
void MainWindow::style_message_bar() {
  QColor accent(74, 134, 200);
  if (m_message_kind == "error") accent = QColor(208, 48, 47);
  if (m_message_kind == "warning") accent = QColor(224, 160, 48);
  const QColor window = palette().color(QPalette::Window), text = palette().color(QPalette::WindowText);
  constexpr double a = 0.18;  // of the accent in the background
  const QColor bg = QColor::fromRgbF(static_cast<float>(window.redF() * (1 - a) + accent.redF() * a),
                                     static_cast<float>(window.greenF() * (1 - a) + accent.greenF() * a),
                                     static_cast<float>(window.blueF() * (1 - a) + accent.blueF() * a));
  m_message->setStyleSheet(QString("QFrame#message_bar{background:%1;border:1px solid %2;border-radius:4px}"
                                   "QFrame#message_bar QLabel{color:%3}QFrame#message_bar QToolButton{color:%3}")
                               .arg(bg.name(), accent.name(), text.name()));
}

void MainWindow::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange && m_message && !m_message_kind.isEmpty()) style_message_bar();
  QMainWindow::changeEvent(e);
}

QString MainWindow::message_text() const { return m_message->isHidden() ? QString() : m_message_label->text(); }

void MainWindow::update_buttons() {
  const bool r = m_session->running();
  m_start->setEnabled(!r);
  m_pause->setEnabled(r);
  m_stop->setEnabled(r);
  m_presets->setEnabled(!r);
  m_pause->setText(r && m_session->paused() ? "Resume" : "Pause");
  m_pause->setIcon(style()->standardIcon(r && m_session->paused() ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
}

void MainWindow::restore_settings() {
  QSettings s;
  use_dark_palette(s.value("view/dark_palette", false).toBool());
  m_dark_action->setChecked(dark_palette_in_use());
  if (s.contains("window/geometry")) restoreGeometry(s.value("window/geometry").toByteArray());
  if (s.contains("window/state")) restoreState(s.value("window/state").toByteArray());
  if (s.contains("window/hsplit")) m_hsplit->restoreState(s.value("window/hsplit").toByteArray());
  if (s.contains("window/vsplit")) m_vsplit->restoreState(s.value("window/vsplit").toByteArray());
  m_plots->set_smoothing(s.value("plots/smoothing", 0.6).toDouble());
  const QString cfg = s.value("config/last").toString();
  m_first_launch = cfg.isEmpty();
  if (!cfg.isEmpty()) {
    try {
      m_form->set_config(Config::from_record(Json::parse(cfg.toStdString())));
    } catch (const std::exception&) {
    }
  }
  // The overlay choices as the window was left: the baseline run and the ticked runs.
  const QString baseline = s.value("runs/baseline").toString();
  if (!baseline.isEmpty() && QFile::exists(baseline + "/config.json")) m_runs->set_baseline(baseline);
  QStringList overlays;
  for (const auto& d : s.value("runs/overlays").toStringList())
    if (QFile::exists(d + "/config.json")) overlays << d;
  const QString last = s.value("runs/last").toString();
  if (!last.isEmpty() && QFile::exists(last + "/config.json")) {
    try {
      m_primary = load_cached(last);
    } catch (const Error&) {
    }
  }
  if (!overlays.isEmpty())
    m_runs->set_checked(overlays);
  else if (m_primary)
    update_plots();
}

void MainWindow::save_settings() {
  QSettings s;
  s.setValue("window/geometry", saveGeometry());
  s.setValue("window/state", saveState());
  s.setValue("window/hsplit", m_hsplit->saveState());
  s.setValue("window/vsplit", m_vsplit->saveState());
  s.setValue("plots/smoothing", m_plots->smoothing());
  s.setValue("runs/root", m_runs->root());
  try {
    Config c = m_form->config();
    s.setValue("config/last", QString::fromStdString(c.to_json().dump()));
  } catch (const Error&) {
  }
  if (m_primary && QFile::exists(m_primary->dir + "/config.json")) s.setValue("runs/last", m_primary->dir);
}

// Closing while a run trains asks first (a long run is not lost to a stray click); "Yes" stops the
// run at its next step like the Stop button and waits until its record ("stopped", with weights)
// is written, then the window closes.
void MainWindow::closeEvent(QCloseEvent* e) {
  if (m_session->running()) {
    const auto a = QMessageBox::question(this, "Quit TrainLab",
                                         "A run is training. Stop it and quit? (Its record so far is kept.)",
                                         QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
    if (a != QMessageBox::Yes) {
      e->ignore();
      return;
    }
  }
  save_settings();
  end_session();
  e->accept();
}

void MainWindow::quit_for_signal(int signo) {
  const bool had_run = m_session->running();
  save_settings();
  end_session();
  if (had_run && m_live)
    std::fprintf(stderr, "trainlab: %s (signal %d): the run stopped; its record is in %s\n", strsignal(signo), signo,
                 qPrintable(QDir::toNativeSeparators(m_live->dir)));
  QApplication::exit(128 + signo);
}

// Stops the run (if any) and waits for the worker to write its record and end.
void MainWindow::end_session() {
  const bool waits = m_session->running();
  if (waits) {
    m_status->setText("Stopping the run and writing its record...");
    m_status->repaint();
    QApplication::setOverrideCursor(Qt::WaitCursor);
  }
  m_session->shutdown();
  if (waits) QApplication::restoreOverrideCursor();
}

}  // namespace trainlab::app
