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
};

QTEST_GUILESS_MAIN(TestCalibrationNotice)
#include "test_calibration_notice.moc"
