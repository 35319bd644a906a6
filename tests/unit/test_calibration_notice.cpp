// ctest-labels: unit;slow
// The device measurement a run makes after a new build (or on a fresh cache): announced before it
// starts in plain words, with no path or byte count, and left out of the run's own time, so that
// a run's recorded wall time after a new build is a warm cache's (within 20 %), where it used to
// be several times longer (the digits run's 0.35 s became 1.9-3.1 s).
#include <QtTest>

#include "backend/backend.h"
#include "backend/calibration.h"
#include "train/trainer.h"

using namespace trainlab;

class TestCalibrationNotice : public QObject {
  Q_OBJECT
  QTemporaryDir m_cache;

  // A cache file for this CPU written by another build of the lab (what a rebuild leaves behind).
  void write_other_builds_file() {
    const auto cpu = create_backend("cpu");
    Calibration cal;
    cal.device = cpu->info().name, cal.software = cpu->info().software;
    cal.lab_version = lab_version(), cal.build = "another build";
    cal.peaks = calibration_plan(cpu->info());
    for (CalibratedPeak& p : cal.peaks) p.tflops = 1.0, p.size = 512;
    cal.bandwidth_bytes_per_s = 7e9, cal.seconds = 2.0;
    const std::string dir = m_cache.path().toStdString() + "/trainlab";
    std::filesystem::create_directories(dir);
    std::ofstream(calibration_file(dir, cpu->info())) << calibration_to_json(cal);
  }

  // A cache file for this CPU and build whose peaks are `tflops` (what a measurement on a busy
  // machine leaves: too low).
  void write_this_builds_file(double tflops) {
    const auto cpu = create_backend("cpu");
    Calibration cal;
    cal.device = cpu->info().name, cal.software = cpu->info().software;
    cal.lab_version = lab_version(), cal.build = lab_build();
    cal.peaks = calibration_plan(cpu->info());
    for (CalibratedPeak& p : cal.peaks) p.tflops = tflops, p.size = 512;
    cal.bandwidth_bytes_per_s = 7e9, cal.seconds = 2.0;
    const std::string dir = m_cache.path().toStdString() + "/trainlab";
    std::filesystem::create_directories(dir);
    std::ofstream(calibration_file(dir, cpu->info())) << calibration_to_json(cal);
  }

  // A digits run of 40 epochs on the CPU (about half a second); its wall time and notices.
  double run(std::vector<std::string>& notices) {
    Config c;
    c.set("device.name", "cpu");
    c.set("train.epochs", "40");
    c.set("run.save_weights", "false");
    QTemporaryDir out;
    c.set_json("run.out", out.filePath("run").toStdString());
    TrainerCallbacks cb;
    cb.on_notice = [&notices](const std::string& s) { notices.push_back(s); };
    Trainer t(c, cb);
    const RunSummary s = t.run();
    if (s.status != "completed") qWarning("run %s: %s", s.status.c_str(), s.message.c_str());
    return s.wall_s;
  }

 private slots:
  void initTestCase() { qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8()); }
  void cleanupTestCase() { qunsetenv("XDG_CACHE_HOME"); }

  void aFreshCacheIsAnnouncedPlainly() {
    std::vector<std::string> notices;
    run(notices);
    QCOMPARE(notices.size(), size_t{1});
    const QString n = QString::fromStdString(notices[0]);
    QVERIFY2(n.startsWith("Measuring this CPU's speed once (about "), qPrintable(n));
    QVERIFY2(n.contains("for MFU and the roofline: the first run on this device"), qPrintable(n));
    for (const char* technical : {"/", "bytes", "json", " ns"}) QVERIFY2(!n.contains(technical), qPrintable(n));
    // Measured once: the next run uses the kept measurement, without a word.
    notices.clear();
    run(notices);
    QVERIFY(notices.empty());
  }

  void aNewBuildsRunTakesAWarmCachesTime() {
    std::vector<std::string> notices;
    run(notices);  // warm: measured (or kept) for this build
    double warm = 1e9, after_build = 1e9;
    for (int i = 0; i < 2; ++i) {  // the faster of two of each: the machine may be busy
      notices.clear();
      write_other_builds_file();
      after_build = std::min(after_build, run(notices));
      QCOMPARE(notices.size(), size_t{1});
      const QString n = QString::fromStdString(notices[0]);
      QVERIFY2(n.contains("TrainLab was rebuilt since the last measurement"), qPrintable(n));
      QVERIFY2(n.contains("about 2 s"), qPrintable(n));  // the last measurement's time
      QVERIFY2(!n.contains("/") && !n.contains("bytes"), qPrintable(n));
      notices.clear();
      warm = std::min(warm, run(notices));
      QVERIFY(notices.empty());
    }
    qInfo("wall time after a new build %.3f s, on a warm cache %.3f s", after_build, warm);
    QVERIFY2(std::fabs(after_build - warm) <= 0.2 * warm,
             qPrintable(QString("after a new build %1 s, warm cache %2 s").arg(after_build).arg(warm)));
  }

  // A peak measured while the machine was busy is below what a run then computes: MFU read above
  // 100 % (bf16 digits at 125 % in the runs comparison). The run raises the peak to its own rate,
  // so MFU stays at or below 100 % and reaches it at the fastest step; the run's roofline has the
  // raised roof.
  void mfuNeverExceedsTheMeasuredPeak() {
    write_this_builds_file(1e-6);  // 1 MFLOP/s: every step of the digits MLP is faster
    Config c;
    c.set("device.name", "cpu");
    c.set("train.steps", "120");
    c.set("run.save_weights", "false");
    QTemporaryDir out;
    c.set_json("run.out", out.filePath("run").toStdString());
    TrainerCallbacks cb;
    double top = 0.0, last_roof = 0.0;
    long above = 0;
    cb.on_step = [&](const StepMetrics& m) {
      top = std::max(top, m.mfu);
      above += m.mfu > 1.0 + 1e-9;
      if (m.roofline) last_roof = m.roofline->peak_for(DType::F32, MatmulMode::Native);
    };
    Trainer t(c, cb);
    QCOMPARE(QString::fromStdString(t.run().status), QString("completed"));
    QCOMPARE(above, 0L);
    QVERIFY2(top > 0.999, qPrintable(QString::number(top)));
    QVERIFY2(last_roof > 1e-3, qPrintable(QString::number(last_roof)));  // raised from 1e-6 TFLOP/s
  }
};

QTEST_GUILESS_MAIN(TestCalibrationNotice)
#include "test_calibration_notice.moc"
