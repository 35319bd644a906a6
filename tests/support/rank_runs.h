// Runs of several ranks from a test: a process (mpirun of trainlab-cli, or of the test itself as a
// worker) with its exit code, output and time, and the run records' numbers compared. The CPU
// ranks run with one OpenBLAS thread each and NCCL's NVLink multicast off.
#pragma once
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QProcess>
#include <QStandardPaths>
#include <QString>
#include <QStringList>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "test_support.h"

namespace trainlab::test {

struct Result {
  int code = -1;
  QString out, err;
  double seconds = 0.0;
};

inline QString describe(const Result& r) {
  return QString("exit %1 after %2 s\nstdout: %3\nstderr: %4").arg(r.code).arg(r.seconds).arg(r.out, r.err);
}

inline Result run(const QString& program, const QStringList& args, int timeout_ms = 120000) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("OPENBLAS_NUM_THREADS", "1");
  env.insert("NCCL_NVLS_ENABLE", "0");
  p.setProcessEnvironment(env);
  QElapsedTimer t;
  t.start();
  p.start(program, args);
  Result r;
  if (!p.waitForStarted(10000)) {
    r.err = "could not start " + program;
    return r;
  }
  p.closeWriteChannel();
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out: " + QString::fromUtf8(p.readAllStandardError());
    return r;
  }
  r.seconds = static_cast<double>(t.elapsed()) / 1000.0;
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

// A worker's (this executable under mpirun) failure: the line the test reads, and exit code 1.
inline int fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

inline QString mpirun_path() { return QStandardPaths::findExecutable("mpirun"); }

inline QStringList mpirun_args(int ranks) { return {"--allow-run-as-root", "--oversubscribe", "-np", QString::number(ranks)}; }

// trainlab-cli on `ranks` ranks (0: no mpirun), CPU, quiet.
inline Result cli(int ranks, const QStringList& args) {
  const QStringList train = QStringList{"train", "--device", "cpu", "--quiet"} + args;
  if (ranks == 0) return run(TRAINLAB_CLI_PATH, train);
  return run(mpirun_path(), mpirun_args(ranks) + QStringList{TRAINLAB_CLI_PATH} + train);
}

inline QStringList error_lines(const Result& r) {
  QStringList out;
  for (const QString& l : r.err.split('\n'))
    if (l.startsWith("error:")) out << l;
  return out;
}

inline std::vector<double> losses(const QString& dir, const char* key = "loss") {
  std::vector<double> out;
  for (const Json& j : metrics_lines(dir.toStdString()))
    if (j.contains(key)) out.push_back(j.at(key).get<double>());
  return out;
}

// Every value of b within `rel` (relative) of a's; a message naming the first that is not.
inline QString compare(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  if (a.size() != b.size() || a.empty()) return QString("%1 values against %2").arg(a.size()).arg(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= rel * std::fabs(a[i])))
      return QString("value %1: %2 against %3 (relative %4)").arg(i).arg(a[i], 0, 'g', 17).arg(b[i], 0, 'g', 17).arg(
          std::fabs(a[i] - b[i]) / std::fabs(a[i]));
  return {};
}

inline Json last_metrics(const QString& dir) { return metrics_lines(dir.toStdString()).back(); }

inline int64_t mem_of(const Json& m, const char* cat) { return m.at(cat).get<int64_t>(); }

}  // namespace trainlab::test
