// Running the built trainlab-cli (TRAINLAB_CLI_PATH) from a test: its exit code, stdout and stderr.
#pragma once
#include <QProcess>
#include <QString>
#include <QStringList>

namespace trainlab::test {

struct CliResult {
  int code = -1;  // -1: did not start, -2: crashed, -3: ran past the timeout (killed)
  QString out, err;
};

inline CliResult run_cli(const QStringList& args, int timeout_ms) {
  QProcess p;
  p.start(QStringLiteral(TRAINLAB_CLI_PATH), args);
  CliResult r;
  if (!p.waitForStarted(10000)) {
    r.err = "could not start " + QStringLiteral(TRAINLAB_CLI_PATH);
    return r;
  }
  p.closeWriteChannel();
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.code = -3;
    r.err = "timed out";
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

}  // namespace trainlab::test
