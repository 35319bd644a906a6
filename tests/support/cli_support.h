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

// Runs `program` with `args` and collects what it did.
inline CliResult run_process(const QString& program, const QStringList& args, int timeout_ms) {
  QProcess p;
  p.start(program, args);
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

inline CliResult run_cli(const QStringList& args, int timeout_ms) {
  return run_process(QStringLiteral(TRAINLAB_CLI_PATH), args, timeout_ms);
}

// trainlab-cli with its address space limited to 2 GB: a reader without bounds dies with
// bad_alloc (or is killed) instead of taking the machine's memory. Under AddressSanitizer, which
// reserves terabytes of shadow address space, there is no cap: an allocation the input does not
// back is then ASan's own "allocation-size-too-big" failure.
inline CliResult run_cli_limited(const QStringList& args, int timeout_ms = 60000) {
#if defined(__SANITIZE_ADDRESS__)
  const QString script = "exec \"$0\" \"$@\"";
#else
  const QString script = "ulimit -v 2000000; exec \"$0\" \"$@\"";
#endif
  return run_process("sh", QStringList{"-c", script, QStringLiteral(TRAINLAB_CLI_PATH)} + args, timeout_ms);
}

inline QString describe(const CliResult& r) {
  return QString("exit %1\nstdout: %2\nstderr: %3").arg(r.code).arg(r.out, r.err);
}

}  // namespace trainlab::test
