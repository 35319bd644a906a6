#include "rank_launch.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryFile>
#include <QThread>

#include "train/run_record.h"
#include "util/error.h"

namespace trainlab::app {

QString find_trainlab_cli() {
  const QString here = QCoreApplication::applicationDirPath();
  for (const QString& p : {here + "/trainlab-cli", here + "/../core/trainlab-cli"})
    if (QFileInfo(p).isExecutable()) return QFileInfo(p).canonicalFilePath();
  return QStandardPaths::findExecutable("trainlab-cli");
}

namespace {

// The complete lines appended to `path` since `offset` (which moves past them).
QStringList new_lines(const QString& path, qint64& offset) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly) || f.size() <= offset) return {};
  f.seek(offset);
  const QByteArray bytes = f.readAll();
  const qsizetype end = bytes.lastIndexOf('\n');
  if (end < 0) return {};
  offset += end + 1;
  return QString::fromUtf8(bytes.left(end)).split('\n', Qt::SkipEmptyParts);
}

}  // namespace

LaunchedRun run_through_launcher(const Config& config, const std::function<void(const StepMetrics&)>& on_step,
                                 const std::atomic<bool>& stop) {
  LaunchedRun out;
  out.run_dir = QString::fromStdString(config.get_string("run.out"));
  const QString cli = find_trainlab_cli();
  if (cli.isEmpty()) {
    out.message = "a run over several ranks starts through trainlab-cli, which is not beside the app or on the PATH";
    return out;
  }
  QTemporaryFile file(QDir::tempPath() + "/trainlab-ranks-XXXXXX.json");
  if (!file.open() || file.write(QByteArray::fromStdString(config.to_json().dump(2))) < 0 || !file.flush()) {
    out.message = "cannot write the run's config to " + file.fileName();
    return out;
  }
  QProcess p;
  p.setProcessChannelMode(QProcess::SeparateChannels);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  if (!env.contains("NCCL_NVLS_ENABLE")) env.insert("NCCL_NVLS_ENABLE", "0");
  p.setProcessEnvironment(env);
  p.start(cli, {"train", "--config", file.fileName(), "--quiet"});
  if (!p.waitForStarted(10000)) {
    out.message = "cannot start " + cli + ": " + p.errorString();
    return out;
  }
  const QString metrics = out.run_dir + "/metrics.jsonl";
  qint64 offset = 0;
  bool stopping = false;
  MetricsLineReader lines;  // slow fields are written only where they change
  auto drain = [&] {
    for (const QString& line : new_lines(metrics, offset)) {
      try {
        on_step(lines.read(Json::parse(line.toStdString())));
      } catch (const std::exception&) {  // a line being written; the record keeps it
      }
    }
  };
  while (!p.waitForFinished(200)) {
    drain();
    if (stop.load() && !stopping) {
      stopping = true;
      p.terminate();
    }
  }
  drain();
  const QString err = QString::fromUtf8(p.readAllStandardError());
  QFile summary(out.run_dir + "/summary.json");
  if (summary.open(QIODevice::ReadOnly)) {
    try {
      const Json s = Json::parse(summary.readAll().toStdString());
      out.status = QString::fromStdString(s.value("status", "failed"));
      out.message = QString::fromStdString(s.value("message", ""));
      return out;
    } catch (const std::exception&) {
    }
  }
  if (stopping) {
    out.status = "stopped";
    out.message = "stopped (the ranks ended before a summary was written)";
    return out;
  }
  // The launcher's first error line names what went wrong.
  for (const QString& l : err.split('\n'))
    if (l.startsWith("error:")) {
      out.message = l.mid(6).trimmed();
      return out;
    }
  out.message = QString("the ranks ended (exit code %1) without a summary").arg(p.exitCode());
  return out;
}

}  // namespace trainlab::app
