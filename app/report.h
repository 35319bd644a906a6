// Reports for one or several runs: PDF (QPdfWriter; text laid out by QTextDocument, plots drawn as
// vector graphics through QCPPainter), self-contained HTML (plots as embedded SVG, base64), and the
// metrics as CSV. Contents: the runs with their final metrics, tags and notes, the config differences between them,
// the mid-run events, the plots, memory by category against the prediction (per segment of steps
// between mid-run changes: RunSeries::memory_segments), the full configs, and an appendix with
// each lesson of core/lessons/ (its inputs and figures: the defaults, or the Lessons view's inputs).
// Runs over several ranks add a table per rank (time split, bytes sent, memory against the plan's
// per-rank prediction) and the Ranks dock's two plots (ranks_panel.h).
// Runs with kernel timing and measured roofs add their roofline (roofline_view.h), a page each.
// A metric a run has no value for (a diverged run's test accuracy) reads "no value", never 0; the
// lines the reader skipped in a run's record are listed under the runs table.
// Works headless (`trainlab report RUN_DIR... -o report.pdf`) under the offscreen platform.
#pragma once
#include <QPageLayout>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <QTextStream>
#include <map>
#include <memory>
#include <string>

#include "lessons/lesson.h"
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

  // The PDF's pages (A4 landscape, 96 dots an inch) and where a roofline page draws its figure
  // on a page of paint rectangle `page` (the tests render it there).
  static QPageLayout pdf_page_layout();
  static QRectF roofline_figure(const QRectF& page);

  // The text part as HTML (without plots), shared by the PDF and the HTML file.
  QString summary_html(bool for_pdf) const;
  QString config_html() const;
  // What the reader skipped in the runs' records (also listed in the report under the runs table).
  QStringList warnings() const;
  // The appendix: every lesson of the registry with its inputs and figures, computed now.
  QString lessons_html() const;
  // The inputs the appendix computes each lesson with (a lesson not named: its defaults).
  void set_lesson_values(std::map<std::string, LessonValues> values) { m_lesson_values = std::move(values); }

 private:
  // The sections of summary_html, in order.
  void write_runs_table(QTextStream& o) const;
  void write_notes(QTextStream& o) const;
  void write_differences(QTextStream& o) const;
  void write_events(QTextStream& o) const;
  void write_compression(QTextStream& o) const;
  void write_kernel_times(QTextStream& o) const;
  void write_memory(QTextStream& o) const;
  void write_ranks(QTextStream& o) const;

  QVector<std::shared_ptr<RunSeries>> m_runs;
  std::map<std::string, LessonValues> m_lesson_values;
};

}  // namespace trainlab::app
