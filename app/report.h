// Reports for one or several runs: PDF (QPdfWriter; text laid out by QTextDocument, plots drawn as
// vector graphics through QCPPainter), self-contained HTML (plots as embedded SVG, base64), and the
// metrics as CSV. Contents: the runs with their final metrics, the config differences between them,
// the mid-run events, the plots, memory by category against the prediction (per segment of steps
// between mid-run changes: RunSeries::memory_segments), and the full configs.
// Works headless (`trainlab report RUN_DIR... -o report.pdf`) under the offscreen platform.
#pragma once
#include <QString>
#include <QStringList>
#include <QTextStream>
#include <memory>

#include "run_series.h"

namespace trainlab::app {

class Report {
 public:
  explicit Report(QVector<std::shared_ptr<RunSeries>> runs);
  // Loads run folders (throws Error on a folder that is not a run record).
  static Report from_dirs(const QStringList& dirs);

  // By extension: .pdf, .html/.htm, .csv. Throws Error (unknown extension, unwritable file).
  void write(const QString& path) const;
  void write_pdf(const QString& path) const;
  void write_html(const QString& path) const;
  void write_csv(const QString& path) const;

  // The text part as HTML (without plots), shared by the PDF and the HTML file.
  QString summary_html(bool for_pdf) const;
  QString config_html() const;

 private:
  // The sections of summary_html, in order.
  void write_runs_table(QTextStream& o) const;
  void write_differences(QTextStream& o) const;
  void write_events(QTextStream& o) const;
  void write_compression(QTextStream& o) const;
  void write_kernel_times(QTextStream& o) const;
  void write_memory(QTextStream& o) const;

  QVector<std::shared_ptr<RunSeries>> m_runs;
};

}  // namespace trainlab::app
