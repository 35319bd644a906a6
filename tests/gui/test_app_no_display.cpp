// The built trainlab binary without any display (no DISPLAY, WAYLAND_DISPLAY or QT_QPA_PLATFORM, as
// over ssh or in a container): `--help` and `--version` print and exit 0 instead of aborting because
// no window can open.
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QtTest>

class TestAppNoDisplay : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

  struct Result {
    int code = -1;
    QString out, err;
  };

  Result run_without_display(const QStringList& args) const {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* var : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) env.remove(var);
    env.insert("HOME", m_tmp.filePath("home"));
    env.insert("XDG_CONFIG_HOME", m_tmp.filePath("home/.config"));
    env.insert("XDG_RUNTIME_DIR", m_tmp.path());
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(TRAINLAB_APP_PATH), args);
    Result r;
    if (!p.waitForStarted(10000) || !p.waitForFinished(30000)) {
      p.kill();
      p.waitForFinished();
      return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
  }

 private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void helpPrintsWithoutADisplay_data() {
    QTest::addColumn<QString>("option");
    QTest::newRow("--help") << "--help";
    QTest::newRow("-h") << "-h";
    QTest::newRow("--help-all") << "--help-all";
  }
  void helpPrintsWithoutADisplay() {
    QFETCH(QString, option);
    const Result r = run_without_display({option});
    QVERIFY2(r.code == 0, qPrintable(QString("exit %1, stderr: %2").arg(r.code).arg(r.err)));
    QVERIFY2(r.out.contains("--screenshot <FILE>"), qPrintable(r.out));
    QVERIFY2(r.out.contains("--start"), qPrintable(r.out));
  }

  void helpAfterOtherOptionsPrintsWithoutADisplay() {
    const Result r = run_without_display({"--set", "train.steps=10", "--help"});
    QVERIFY2(r.code == 0, qPrintable(QString("exit %1, stderr: %2").arg(r.code).arg(r.err)));
    QVERIFY2(r.out.contains("--runs-dir <DIR>"), qPrintable(r.out));
  }

  void versionPrintsWithoutADisplay() {
    const Result r = run_without_display({"--version"});
    QVERIFY2(r.code == 0, qPrintable(QString("exit %1, stderr: %2").arg(r.code).arg(r.err)));
    QCOMPARE(r.out.trimmed(), QString("trainlab " TRAINLAB_VERSION));
  }
};

QTEST_GUILESS_MAIN(TestAppNoDisplay)
#include "test_app_no_display.moc"
