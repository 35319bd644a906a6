#include "app_cli.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QPalette>
#include <QStyle>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "lessons_view.h"
#include "main_window.h"
#include "palette.h"
#include "report.h"
#include "sensitivity_view.h"
#include "stop_signals.h"
#include "util/error.h"
#include "window_targets.h"

namespace trainlab::app {

void set_application_names() {
  QCoreApplication::setOrganizationName("TrainLab");
  QCoreApplication::setApplicationName("trainlab");
  QCoreApplication::setApplicationVersion(TRAINLAB_VERSION);
}

int run_report_command(int argc, char** argv) {
  // Headless: no display needed.
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY") &&
      qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  set_application_names();
  QCommandLineParser p;
  p.setApplicationDescription("Write a report of one or several runs: PDF, self-contained HTML, or the metrics as CSV.");
  p.addHelpOption();
  p.addPositionalArgument("report", "the command");
  p.addPositionalArgument("RUN_DIR", "run-record folders (runs/<date>-<model>-<precision>)", "RUN_DIR...");
  QCommandLineOption out({"o", "output"}, "report file: .pdf, .html or .csv", "FILE");
  p.addOption(out);
  p.process(app);
  QStringList dirs = p.positionalArguments();
  if (!dirs.isEmpty() && dirs.first() == "report") dirs.removeFirst();
  if (dirs.isEmpty() || !p.isSet(out)) {
    std::fprintf(stderr, "usage: trainlab report RUN_DIR... -o report.pdf|report.html|metrics.csv\n");
    return 2;
  }
  try {
    const Report report = Report::from_dirs(dirs);
    for (const QString& w : report.warnings()) std::fprintf(stderr, "warning: %s\n", qPrintable(w));
    report.write(p.value(out));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", describe_exception(e, "writing the report").c_str());
    return 1;
  }
  std::printf("wrote %s\n", qPrintable(QDir::toNativeSeparators(QFileInfo(p.value(out)).absoluteFilePath())));
  return 0;
}


namespace {
// Whether the command line asks only for --help or --version: those print without a window, so
// they must not need a display (QApplication aborts without one).
bool asks_for_help_or_version(int argc, char** argv) {
  QCommandLineParser p;
  p.setOptionsAfterPositionalArgumentsMode(QCommandLineParser::ParseAsOptions);
  const QCommandLineOption help(QStringList{"h", "?", "help"}), help_all("help-all"), version(QStringList{"v", "version"});
  p.addOptions({help, help_all, version});
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  // Unknown options are the window's: only these three matter here.
  static_cast<void>(p.parse(args));
  return p.isSet(help) || p.isSet(help_all) || p.isSet(version);
}

// The window --lesson, --sensitivity or --view opens (and --screenshot saves), else the main
// window; null (the error printed) for a --view that cannot open.
QWidget* window_to_show(MainWindow& w, const QCommandLineParser& p, const QCommandLineOption& lesson,
                        const QCommandLineOption& sensitivity, const QCommandLineOption& size,
                        const QCommandLineOption& view) {
  if (p.isSet(lesson)) {
    w.findChild<QAction*>("action_lessons")->trigger();
    auto* v = w.findChild<LessonsView*>();
    if (!v->select_lesson(p.value(lesson))) std::fprintf(stderr, "warning: no lesson '%s'\n", qPrintable(p.value(lesson)));
    if (p.isSet(size)) v->resize(w.size());
    return v;
  }
  if (p.isSet(sensitivity)) {
    SensitivityView* v = w.show_sensitivity_view();
    if (p.isSet(size)) v->resize(w.size());
    v->set_weights(p.value(sensitivity));
    v->measure();
    return v;
  }
  if (p.isSet(view)) {
    const QString spec = p.value(view);
    const int eq = spec.indexOf('=');
    QString error;
    QWidget* v = open_view(w, eq < 0 ? spec : spec.left(eq), eq < 0 ? QString() : spec.mid(eq + 1), error);
    if (!v) std::fprintf(stderr, "error: %s\n", qPrintable(error));
    return v;
  }
  return &w;
}
}  // namespace

namespace {
// --change-at MS:KEY=VALUE: each sets a live key in the form MS after the start.
void schedule_changes(MainWindow& w, const QStringList& specs) {
  for (const QString& spec : specs) {
    const int colon = spec.indexOf(':'), eq = spec.indexOf('=');
    if (colon < 0 || eq < colon) continue;
    const int ms = spec.left(colon).toInt();
    const std::string key = spec.mid(colon + 1, eq - colon - 1).toStdString();
    const QString value = spec.mid(eq + 1);
    QTimer::singleShot(ms, &w, [&w, key, value] {
      const ConfigKey* k = find_config_key(key);
      if (!k) return;
      Json v;
      if (k->type == KeyType::Int) v = value.toLongLong();
      else if (k->type == KeyType::Float) v = value.toDouble();
      else if (k->type == KeyType::Bool) v = value == "true" || value == "1";
      else v = value.toStdString();
      w.form()->set_value(key, v);
    });
  }
}

// --screenshot FILE: saved `ms` after the start and, with `steps` > 0, once the live run has that
// many steps (a busy machine's run is slower: a time alone caught it before its markers); then
// the run stops and the app quits. A dialog is modal: the one open then is saved.
void schedule_screenshot(MainWindow& w, const QString& file, int ms, long steps, QWidget* target, bool of_dialog) {
  auto* poll = new QTimer(&w);  // from `ms` on, every 200 ms until the run has its steps
  poll->setInterval(200);
  QObject::connect(poll, &QTimer::timeout, &w, [&w, poll, file, steps, target, of_dialog] {
    if (steps > 0 && w.running() && (!w.live_run() || w.live_run()->size() < steps)) return;
    poll->stop();
    w.plots()->refresh();
    QApplication::processEvents();
    QWidget* shown = of_dialog && QApplication::activeModalWidget() ? QApplication::activeModalWidget() : target;
    const bool ok = shown->grab().save(file);
    std::fprintf(stderr, "%s %s\n", ok ? "saved" : "could not save", qPrintable(file));
    if (w.running()) w.session()->stop();
    QTimer::singleShot(100, qApp, [] { QApplication::exit(0); });
  });
  QTimer::singleShot(std::max(0, ms - 200), poll, [poll] { poll->start(); });
}

// --palette names system or dark (or is not given: the remembered View > Dark palette).
bool palette_choice_valid(const QCommandLineParser& p, const QCommandLineOption& palette) {
  if (!p.isSet(palette) || p.value(palette) == "dark" || p.value(palette) == "system") return true;
  std::fprintf(stderr, "error: --palette %s: expected system or dark\n", qPrintable(p.value(palette)));
  return false;
}
}  // namespace

int run_window(int argc, char** argv) {
  // --help and --version print and exit inside p.process(): a QCoreApplication is enough for them.
  std::unique_ptr<QCoreApplication> app_ptr;
  if (asks_for_help_or_version(argc, argv))
    app_ptr = std::make_unique<QCoreApplication>(argc, argv);
  else
    app_ptr = std::make_unique<QApplication>(argc, argv);
  QCoreApplication& app = *app_ptr;
  set_application_names();
  QCommandLineParser p;
  p.setApplicationDescription(
      "TrainLab: train the digits MLP (and more) with live plots of loss, accuracy, throughput and memory.\n"
      "Headless report: trainlab report RUN_DIR... -o report.pdf|report.html|metrics.csv\n"
      "SIGINT, SIGTERM and SIGHUP stop a training run like the Stop button (its record and weights are\n"
      "kept) and quit with exit code 128 + the signal's number.");
  p.addHelpOption();
  p.addVersionOption();
  QCommandLineOption runs_dir("runs-dir", "folder of run records (default: remembered, else ./runs)", "DIR");
  QCommandLineOption config("config", "load this config JSON into the controls", "FILE");
  QCommandLineOption set("set", "set one config key in the controls (repeatable)", "KEY=VALUE");
  QCommandLineOption start("start", "start a run at once");
  QCommandLineOption change("change-at", "change a live key while the run trains, MS after start (repeatable)",
                            "MS:KEY=VALUE");
  QCommandLineOption overlay("overlay", "overlay this run folder on the plots (repeatable)", "DIR");
  QCommandLineOption reopen("reopen", "show this run folder on the plots", "DIR");
  QCommandLineOption shot("screenshot", "save a PNG of the window, then quit", "FILE");
  QCommandLineOption shot_ms("screenshot-after-ms", "when to take the screenshot (default 2000)", "MS", "2000");
  QCommandLineOption shot_steps("screenshot-after-steps", "and not before the started run has N steps", "N", "0");
  QCommandLineOption size("size", "window size", "WxH");
  QCommandLineOption quit_done("quit-when-done", "quit when the started run ends");
  QCommandLineOption palette("palette", "colours: system or dark (default: as View > Dark palette was left)", "NAME");
  QCommandLineOption lesson("lesson", "open Help > Lessons on this lesson (--screenshot then saves that window)",
                            "NAME");
  QCommandLineOption sensitivity("sensitivity",
                                 "open View > Layer sensitivity on these weights (a run folder) and measure them "
                                 "(--screenshot then saves that window)",
                                 "WEIGHTS");
  QCommandLineOption view("view", "open this view at start: " + view_names().join(", ") +
                                      " (sweep=FILE: a sweep.csv); --screenshot then saves its window",
                          "NAME");
  QCommandLineOption dialog("dialog", "open this dialog at start: " + dialog_names().join(", ") +
                                          " (tags and rename: of the --reopen run); --screenshot then saves it",
                            "NAME");
  for (const auto& o : {runs_dir, config, set, start, change, overlay, reopen, shot, shot_ms, shot_steps, size, quit_done, palette,
                        lesson, sensitivity, view, dialog})
    p.addOption(o);
  p.process(app);
  if (!palette_choice_valid(p, palette)) return 2;

  MainWindow w(p.value(runs_dir));
  if (p.isSet(palette)) use_dark_palette(p.value(palette) == "dark");  // this start only, not remembered
  // SIGINT, SIGTERM and SIGHUP end a run like the Stop button and quit (exit code 128 + signo).
  std::unique_ptr<StopSignals> stop_signals;
  try {
    stop_signals = std::make_unique<StopSignals>();
    QObject::connect(stop_signals.get(), &StopSignals::received, &w, &MainWindow::quit_for_signal);
  } catch (const Error& e) {
    std::fprintf(stderr, "warning: %s; a signal will end the app without stopping its run\n", e.what());
  }
  if (p.isSet(size)) {
    const QStringList wh = p.value(size).split('x');
    if (wh.size() == 2) w.resize(wh[0].toInt(), wh[1].toInt());
  }
  if (p.isSet(config)) w.load_preset(p.value(config));
  if (!p.isSet(config) && w.first_launch()) w.prepare_first_launch();  // the digits run of a first start
  // The --set keys are the user's own: a switched model or optimizer brings its defaults to the
  // others (config/run_defaults.h), as in the form.
  std::vector<std::pair<std::string, std::string>> sets;
  for (const QString& kv : p.values(set)) {
    const int eq = kv.indexOf('=');
    if (eq < 0) {
      w.show_message("error", "--set " + kv + ": expected KEY=VALUE, e.g. --set train.batch=128");
      continue;
    }
    sets.emplace_back(kv.left(eq).toStdString(), kv.mid(eq + 1).toStdString());
  }
  try {
    if (!sets.empty()) w.form()->apply_user_settings(sets);
  } catch (const Error& e) {
    w.show_message("error", QString::fromStdString(e.what()));
  }
  if (p.isSet(reopen)) w.reopen(QDir(p.value(reopen)).absolutePath());
  if (p.isSet(overlay)) {
    QStringList dirs;
    for (const auto& d : p.values(overlay)) dirs << QDir(d).absolutePath();
    w.runs()->set_checked(dirs);
  }
  w.show();
  QWidget* shot_target = window_to_show(w, p, lesson, sensitivity, size, view);
  if (!shot_target) return 2;
  QString dialog_error;
  if (p.isSet(dialog) && !open_dialog(w, p.value(dialog), dialog_error)) {
    std::fprintf(stderr, "error: %s\n", qPrintable(dialog_error));
    return 2;
  }
  if (p.isSet(start)) {
    QTimer::singleShot(0, &w, [&w] { w.start_run(); });
    schedule_changes(w, p.values(change));
    if (p.isSet(quit_done))
      QObject::connect(w.session(), &TrainingSession::finished, &app, [] { QTimer::singleShot(300, qApp, &QApplication::quit); });
  }
  if (p.isSet(shot))
    schedule_screenshot(w, p.value(shot), p.value(shot_ms).toInt(), p.value(shot_steps).toLong(), shot_target,
                        p.isSet(dialog));
  const int rc = app.exec();
  w.session()->shutdown();
  return rc;
}

}  // namespace trainlab::app
