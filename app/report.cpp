#include "report.h"

#include <QBuffer>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <QTextDocument>
#include <QAbstractTextDocumentLayout>
#include <QTextStream>
#include <algorithm>
#include <cmath>
#include <functional>
#include <qcustomplot.h>
#include <set>

#include "lessons_view.h"
#include "sensitivity_view.h"
#include "plot_panel.h"
#include "ranks_panel.h"
#include "roofline_view.h"
#include "train/run_notes.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

QString esc(const QString& s) { return s.toHtmlEscaped(); }

const char* kCss =
    "body{font-family:'DejaVu Sans',Arial,sans-serif;font-size:10pt;color:#222;max-width:1100px;margin:24px auto;padding:0 16px}"
    "h1{font-size:18pt;margin-bottom:2px}h2{font-size:13pt;margin-top:18px;border-bottom:1px solid #bbb}"
    "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #bbb;padding:3px 6px;font-size:9pt}"
    "th{background:#eef1f5;text-align:left}td.num{text-align:right}tr.diff td{background:#fff3c4}"
    ".muted{color:#666}.bad{color:#b00020;font-weight:bold}img.plot{width:100%;max-width:1000px;border:1px solid #ddd;margin:6px 0}";

// The window's plots for these runs: a learning rate that never changes is named in the loss
// plot's title instead of a plot of its own.
QVector<PlotKind> report_plots(const QVector<std::shared_ptr<RunSeries>>& runs) {
  QVector<PlotKind> k = {PlotKind::Loss, PlotKind::Accuracy, PlotKind::Throughput, PlotKind::Memory};
  if (std::any_of(runs.begin(), runs.end(), [](const auto& r) { return !r->constant_lr(); })) k << PlotKind::LearningRate;
  for (const auto& r : runs)
    if (r->has_loss_scale()) {
      k << PlotKind::LossScale;
      break;
    }
  for (const auto& r : runs)
    if (r->has_sparsity() || r->has_bits()) {
      k << PlotKind::Compression;
      break;
    }
  return k;
}

// The last finite value of a series (NaN when there is none).
double last_finite(const QVector<double>& v) {
  for (int i = v.size() - 1; i >= 0; --i)
    if (std::isfinite(v[i])) return v[i];
  return std::nan("");
}

QString num(double v, int prec = 4) { return QString::number(v, 'g', prec); }

}  // namespace

Report::Report(QVector<std::shared_ptr<RunSeries>> runs) : m_runs(std::move(runs)) {
  for (int i = 0; i < m_runs.size(); ++i) m_runs[i]->color = run_color(i);
}

Report Report::from_dirs(const QStringList& dirs) {
  if (dirs.isEmpty()) throw Error("no runs given for the report");
  QVector<std::shared_ptr<RunSeries>> runs;
  for (const auto& d : dirs) runs << std::make_shared<RunSeries>(RunSeries::load(d));
  return Report(runs);
}

void Report::write(const QString& path) const {
  const QString ext = QFileInfo(path).suffix().toLower();
  if (ext == "pdf")
    write_pdf(path);
  else if (ext == "html" || ext == "htm")
    write_html(path);
  else if (ext == "csv")
    write_csv(path);
  else
    throw Error(path.toStdString() + ": unknown report format '" + ext.toStdString() + "' (use .pdf, .html or .csv)");
}

// The runs with their final metrics, and the messages of runs that stopped early.
void Report::write_runs_table(QTextStream& o) const {
  o << "<h2>Runs and final metrics</h2><table width='100%' cellspacing='0' cellpadding='3' border='1'><tr>"
       "<th>Run</th><th>Status</th><th>Model</th><th>Precision</th><th>Device</th><th>Steps</th>"
       "<th>Test accuracy</th><th>Test loss</th><th>Final train loss</th><th>Samples/s</th><th>Wall time</th>"
       "<th>Peak memory</th></tr>";
  for (const auto& r : m_runs) {
    const Json flat = flatten_config(r->config);
    const Json& s = r->summary;
    auto sv = [&](const char* k) { return summary_number(s, k); };  // NaN: no value (a diverged run's test metrics)
    auto cv = [&](const char* k) { return flat.contains(k) ? esc(json_value_text(flat[k])) : QString(); };
    const QString status = r->status();
    o << "<tr><td><span style='color:" << r->color.name() << "'>&#9632;</span> " << esc(r->name) << "</td><td"
      << (status == "diverged" || status == "failed" ? " class='bad'" : "") << ">" << esc(status) << "</td><td>"
      << cv("model.name") << "</td><td>" << cv("precision.dtype") << (r->precision.isEmpty() || r->precision == cv("precision.dtype") ? QString() : " &rarr; " + esc(r->precision))
      << "</td><td>" << (s.is_object() ? esc(QString::fromStdString(s.value("device", std::string()))) : cv("device.name"))
      << "</td>";
    if (s.is_object()) {
      const double peak = summary_peak_bytes(s);
      o << "<td class='num' align='right'>" << number_text(sv("steps"), 'f', 0) << "</td><td class='num' align='right'>"
        << number_text(100 * sv("test_accuracy"), 'f', 2, " %") << "</td><td class='num' align='right'>"
        << loss_text(sv("test_loss")) << "</td><td class='num' align='right'>"
        << loss_text(sv("final_train_loss")) << "</td><td class='num' align='right'>"
        << number_text(sv("samples_per_s"), 'f', 0) << "</td><td class='num' align='right'>"
        << number_text(sv("wall_s"), 'f', 1, " s") << "</td><td class='num' align='right'>" << format_bytes(peak) << "</td>";
    } else {
      o << "<td class='num' align='right'>" << r->size() << "</td><td colspan='6' class='muted'>no summary (run unfinished)</td>";
    }
    o << "</tr>";
  }
  o << "</table>";
  write_notes(o);
  for (const auto& r : m_runs)
    if (r->summary.is_object() && r->summary.contains("message"))
      o << "<p><b>" << esc(r->name) << ":</b> " << esc(QString::fromStdString(r->summary.value("message", std::string())))
        << "</p>";
  // What the reader skipped in a run's record (bad metrics lines, an unreadable summary).
  for (const auto& r : m_runs)
    for (const QString& w : r->warnings) o << "<p class='bad'><b>" << esc(r->name) << ":</b> " << esc(w) << "</p>";
}

// Each run's tags and notes (notes.json, train/run_notes.h), under the runs table.
void Report::write_notes(QTextStream& o) const {
  for (const auto& r : m_runs) {
    if (r->dir.isEmpty()) continue;
    std::vector<std::string> ignored;  // a bad notes.json is named by the runs table's warnings
    const RunNotes n = read_run_notes(r->dir.toStdString(), ignored);
    if (n.empty()) continue;
    QStringList tags;
    for (const auto& t : n.tags) tags << esc(QString::fromStdString(t));
    o << "<p class='notes'><b>" << esc(r->name) << "</b>";
    if (!tags.isEmpty()) o << " &middot; tags: " << tags.join(", ");
    if (!n.notes.empty()) o << "<br>" << esc(QString::fromStdString(n.notes)).replace("\n", "<br>");
    o << "</p>";
  }
}

QStringList Report::warnings() const {
  QStringList out;
  for (const auto& r : m_runs)
    for (const QString& w : r->warnings) out << w;
  return out;
}

// Differences between the runs (against the first).
void Report::write_differences(QTextStream& o) const {
  if (m_runs.size() > 1) {
    std::vector<Json> flats;
    for (const auto& r : m_runs) flats.push_back(flatten_config(r->config));
    std::set<std::string> keys;
    for (const auto& f : flats)
      for (auto it = f.begin(); it != f.end(); ++it)
        if (it.key().rfind("run.", 0) != 0)
          for (const auto& g : flats)
            if (!g.contains(it.key()) || g[it.key()] != *it) keys.insert(it.key());
    o << "<h2>Config differences</h2>";
    if (keys.empty()) {
      o << "<p>The runs have the same config.</p>";
    } else {
      o << "<table cellspacing='0' cellpadding='3' border='1'><tr><th>Key</th>";
      for (const auto& r : m_runs) o << "<th>" << esc(r->name) << "</th>";
      o << "</tr>";
      for (const auto& k : keys) {
        o << "<tr class='diff'><td bgcolor='#fff3c4'><b>" << esc(QString::fromStdString(k)) << "</b></td>";
        for (const auto& f : flats) o << "<td bgcolor='#fff3c4'>" << (f.contains(k) ? esc(json_value_text(f[k])) : "&ndash;") << "</td>";
        o << "</tr>";
      }
      o << "</table>";
    }
  }
}

// Mid-run changes.
void Report::write_events(QTextStream& o) const {
  bool any_events = false;
  for (const auto& r : m_runs) any_events = any_events || !r->events.isEmpty();
  if (any_events) {
    o << "<h2>Mid-run changes</h2><table cellspacing='0' cellpadding='3' border='1'><tr><th>Run</th><th>Step</th><th>Change</th></tr>";
    for (const auto& r : m_runs)
      for (const auto& e : r->events)
        o << "<tr><td>" << esc(r->name) << "</td><td class='num' align='right'>" << e.step << "</td><td>" << esc(e.label) << "</td></tr>";
    o << "</table>";
  }
}

// A run's mid-run changes of the live keys under `section` ("prune.", "quant."), read from its
// events' labels ("bits: 4 -> 3": Trainer::apply_setting names a key by its last part, which no two
// live keys share), each on a line of its own after the start value: "step 11: quant.bits = 3".
// config.json holds the start values: a run switched to QAT mid-run started with "none".
static QString mid_run_changes(const RunSeries& r, const QString& section) {
  QString out;
  for (const RunEvent& e : r.events)
    for (const QString& part : e.label.split("; ")) {
      if (!part.contains(" -> ")) continue;
      const QString leaf = part.section(": ", 0, 0), value = part.section(" -> ", -1);
      for (const ConfigKey& k : config_schema()) {
        const QString key = QString::fromStdString(k.key);
        if (k.mid_run && key.startsWith(section) && key.endsWith("." + leaf))
          out += "<br>" + esc(QString("step %1: %2 = %3").arg(e.step).arg(key, value));
      }
    }
  return out;
}

// Compression: final sparsity and bits per weight of the runs that pruned or quantized.
void Report::write_compression(QTextStream& o) const {
  bool any_compression = false;
  for (const auto& r : m_runs) any_compression = any_compression || r->has_sparsity() || r->has_bits();
  if (any_compression) {
    o << "<h2>Compression</h2><table cellspacing='0' cellpadding='3' border='1'><tr><th>Run</th><th>Final sparsity</th>"
         "<th>Bits per weight</th><th>Pruning</th><th>Quantization</th></tr>";
    for (const auto& r : m_runs) {
      if (!r->has_sparsity() && !r->has_bits()) continue;
      const Json flat = flatten_config(r->config);
      auto cv = [&](const char* k) { return flat.contains(k) ? esc(json_value_text(flat[k])) : QString("&ndash;"); };
      const double sp = last_finite(r->sparsity), bits = last_finite(r->bits);
      o << "<tr><td>" << esc(r->name) << "</td><td class='num' align='right'>"
        << (std::isfinite(sp) ? QString::number(sp, 'f', 2) + " %" : QString("&ndash;")) << "</td><td class='num' align='right'>"
        << (std::isfinite(bits) ? num(bits, 4) : QString("&ndash;")) << "</td><td>" << cv("prune.method")
        << mid_run_changes(*r, "prune.") << "</td><td>" << cv("quant.mode")
        << (flat.value("quant.mode", std::string()) == "qat" ? " int" + cv("quant.bits") + " " + cv("quant.granularity") : QString())
        << mid_run_changes(*r, "quant.") << "</td></tr>";
    }
    o << "</table>";
  }
  // A run folder with the Sensitivity view's sensitivity.json: its heat maps as tables.
  for (const auto& r : m_runs) o << sensitivity_report_html(r->dir, r->name);
}

// Per-kernel times (runs with device.kernel_timing).
void Report::write_kernel_times(QTextStream& o) const {
  for (const auto& r : m_runs) {
    if (r->kernels.isEmpty()) continue;
    const auto ks = r->kernels_by_time();
    double total = 0;
    for (const auto& k : ks) total += k.ms;
    o << "<h2>Kernel times: " << esc(r->name) << "</h2><p class='muted'>summed over " << r->kernel_steps
      << " timed steps</p><table cellspacing='0' cellpadding='3' border='1'><tr><th>Kernel</th><th>Total ms</th>"
         "<th>Calls</th><th>ms per call</th><th>Share</th></tr>";
    for (int i = 0; i < ks.size() && i < 25; ++i)
      o << "<tr><td>" << esc(ks[i].name) << "</td><td class='num' align='right'>" << QString::number(ks[i].ms, 'f', 3)
        << "</td><td class='num' align='right'>" << ks[i].calls << "</td><td class='num' align='right'>"
        << QString::number(ks[i].calls ? ks[i].ms / static_cast<double>(ks[i].calls) : 0.0, 'f', 4)
        << "</td><td class='num' align='right'>" << QString::number(total > 0 ? 100 * ks[i].ms / total : 0.0, 'f', 1)
        << " %</td></tr>";
    o << "</table>";
  }
}

// Memory by category, measured against predicted, per segment of steps between mid-run changes
// (RunSeries::memory_segments): a run switched from fp32 to bf16 is compared with the fp32
// prediction over its fp32 steps and with the bf16 one after, not with its final config's over all.
void Report::write_memory(QTextStream& o) const {
  o << "<h2>Memory by category: measured against predicted</h2><p class='muted'>Per segment of steps between "
       "mid-run changes: the most bytes the ledger held after a step of the segment, against the prediction "
       "(plan/memory_model) for the segment's config.</p>";
  for (const auto& r : m_runs) {
    if (m_runs.size() > 1) o << "<h3>" << esc(r->name) << "</h3>";
    if (r->memory_segments.isEmpty()) {
      o << "<p class='muted'>no steps</p>";
      continue;
    }
    o << "<table cellspacing='0' cellpadding='3' border='1'><tr><th>Category</th>";
    for (const MemorySegment& g : r->memory_segments) {
      QString head = QString("steps %1&ndash;%2").arg(g.first_step).arg(g.last_step);
      if (!g.change.isEmpty()) head += " (" + esc(g.change) + ")";
      o << "<th>" << head << " measured peak</th><th>predicted</th>";
    }
    o << "</tr>";
    for (size_t c = 0; c <= kMemCategoryCount; ++c) {
      const bool total = c == kMemCategoryCount;
      o << "<tr><td>" << (total ? "<b>total</b>" : mem_category_name(static_cast<MemCategory>(c))) << "</td>";
      for (const MemorySegment& g : r->memory_segments) {
        double meas = 0, pred = 0;
        for (size_t k = 0; k < kMemCategoryCount; ++k)
          if (total || k == c) {
            meas += g.measured[k];
            pred += g.predicted[k];
          }
        o << "<td class='num' align='right'>" << format_bytes(meas) << "</td><td class='num' align='right'>" << format_bytes(pred);
        if (pred > 0 && meas > 0) o << " <span class='muted'>(" << num(100.0 * meas / pred, 3) << " %)</span>";
        o << "</td>";
      }
      o << "</tr>";
    }
    o << "</table>";
  }
}

// Each rank of the runs over several ranks: its time split (mean per step over steps 2..), bytes
// sent a step, and its memory at the last step against core/plan's prediction for it.
void Report::write_ranks(QTextStream& o) const {
  bool header = false;
  for (const auto& r : m_runs) {
    if (!r->has_ranks()) continue;
    if (!header)
      o << "<h2>Ranks</h2><p class='muted'>Runs over several ranks: each rank's step time, mean over the steps "
           "after the first, split into compute, exposed communication (collectives the computation did not "
           "hide) and waiting (for the slowest rank); the bytes it sent a step; its memory at the last step "
           "against the plan's prediction for the rank. The scaling efficiency estimate is every rank's compute "
           "over every rank's step time (trainlab-cli bench --case scaling measures it against one rank).</p>";
    header = true;
    const DistTimeTotals& t = r->dist_times;
    o << "<h3>" << esc(r->name) << "</h3><p>" << esc(layout_text(*r)) << "; scaling efficiency estimate "
      << number_text(100.0 * t.efficiency_estimate(), 'f', 1, " %") << " over " << t.steps() << " steps</p>";
    const int tp = tensor_parallel_degree(*r);
    o << "<table cellspacing='0' cellpadding='3' border='1'><tr><th>Rank</th>"
      << (tp > 1 ? "<th>tensor-parallel group</th>" : "") << "<th>step ms</th><th>compute ms</th>"
         "<th>exposed comm. ms</th><th>waiting ms</th><th>sent a step</th><th>memory (ledger)</th>"
         "<th>predicted</th></tr>";
    for (const RankStepMetrics& m : r->last_ranks) {
      const auto it = std::find_if(t.ranks.begin(), t.ranks.end(), [&](const RankTimeTotals& x) { return x.rank == m.rank; });
      const RankTimeTotals tt = it == t.ranks.end() ? RankTimeTotals{} : *it;  // none: only step 1 so far
      const double n = static_cast<double>(tt.steps);
      auto per_step = [&](double v) { return n > 0 ? num(v / n, 4) : QString("no value"); };
      const double meas = static_cast<double>(m.mem_current.total()), pred = static_cast<double>(m.mem_predicted.total());
      o << "<tr><td>" << m.rank << "</td>";
      if (tp > 1) o << "<td>" << m.rank / tp << " (tp rank " << m.rank % tp << ")</td>";
      for (const QString& v : {per_step(tt.step_ms), per_step(tt.compute_ms), per_step(tt.comm_ms), per_step(tt.wait_ms),
                               n > 0 ? format_bytes(tt.bytes_sent / n) : QString("no value"), format_bytes(meas)})
        o << "<td class='num' align='right'>" << v << "</td>";
      o << "<td class='num' align='right'>" << format_bytes(pred);
      if (pred > 0) o << " <span class='muted'>(" << num(100.0 * meas / pred, 3) << " %)</span>";
      o << "</td></tr>";
    }
    o << "</table>";
  }
}

QString Report::summary_html(bool for_pdf) const {
  QString h;
  QTextStream o(&h);
  o << "<h1>TrainLab report</h1><p class='muted'>" << QDateTime::currentDateTime().toString("yyyy-MM-dd HH:mm")
    << " &middot; " << m_runs.size() << " run" << (m_runs.size() == 1 ? "" : "s") << "</p>";

  write_runs_table(o);
  write_differences(o);
  write_events(o);
  write_compression(o);
  write_kernel_times(o);
  write_memory(o);
  write_ranks(o);
  if (for_pdf) o << "<p class='muted'>Plots follow on the next pages; the full configs are at the end.</p>";
  return h;
}

QString Report::config_html() const {
  QString h;
  QTextStream o(&h);
  std::vector<Json> flats;
  for (const auto& r : m_runs) flats.push_back(flatten_config(r->config));
  std::set<std::string> keys;
  for (const auto& f : flats)
    for (auto it = f.begin(); it != f.end(); ++it) keys.insert(it.key());
  o << "<h2>Configs</h2><table cellspacing='0' cellpadding='2' border='1'><tr><th>Key</th>";
  for (const auto& r : m_runs) o << "<th>" << esc(r->name) << "</th>";
  o << "</tr>";
  for (const auto& k : keys) {
    bool diff = false;
    for (const auto& f : flats) diff = diff || !f.contains(k) || f[k] != flats[0][k];
    const QString bg = diff ? " bgcolor='#fff3c4'" : "";
    o << "<tr" << (diff ? " class='diff'" : "") << "><td" << bg << ">" << esc(QString::fromStdString(k)) << "</td>";
    for (const auto& f : flats) o << "<td" << bg << ">" << (f.contains(k) ? esc(json_value_text(f[k])) : "&ndash;") << "</td>";
    o << "</tr>";
  }
  o << "</table>";
  return h;
}

QString Report::lessons_html() const {
  QString h;
  QTextStream o(&h);
  o << "<h2>Appendix: lessons</h2><p class='muted'>The worked examples of Help &gt; Lessons, computed by the "
       "lab's core (trainlab-cli lesson NAME --json gives the same figures).</p>";
  for (const Lesson& l : lesson_registry()) {
    const auto it = m_lesson_values.find(l.name);
    o << "<h3>" << esc(QString::fromStdString(l.title)) << " <span class='muted'>(" << esc(QString::fromStdString(l.name))
      << ")</span></h3><p class='muted'>";
    try {
      const LessonValues v = lesson_values(l, it == m_lesson_values.end() ? LessonValues{} : it->second);
      QStringList inputs;
      for (const LessonInput& in : l.inputs)
        inputs << esc(QString::fromStdString(in.key)) + " = " + format_lesson_number(v.at(in.key));
      o << inputs.join(", ") << "</p><table cellspacing='0' cellpadding='2' border='1'><tr><th>Figure</th><th>Value</th></tr>";
      for (const LessonFigure& f : l.compute(v).figures)
        o << "<tr><td>" << esc(QString::fromStdString(f.label)) << "</td><td class='num'>" << format_lesson_number(f.value)
          << "</td></tr>";
      o << "</table>";
    } catch (const std::exception& e) {  // inputs that do not fit each other: said, and the report goes on
      o << "</p><p class='bad'>" << esc(QString::fromStdString(e.what())) << "</p>";
    }
  }
  return h;
}

QPageLayout Report::pdf_page_layout() {
  return QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Landscape, QMarginsF(12, 12, 12, 12), QPageLayout::Millimeter);
}

QRectF Report::roofline_figure(const QRectF& page) { return QRectF(0, 0, page.width(), page.height() * 0.8); }

void Report::write_pdf(const QString& path) const {
  PlotPanel panel;
  panel.resize(1200, 900);
  panel.set_smoothing(0.6);
  panel.set_runs(m_runs);
  panel.refresh();

  QPdfWriter writer(path);
  writer.setPageLayout(pdf_page_layout());
  writer.setResolution(96);
  writer.setTitle("TrainLab report");
  writer.setCreator("TrainLab " TRAINLAB_VERSION);
  QCPPainter painter;
  if (!painter.begin(&writer)) throw Error(path.toStdString() + ": cannot write the PDF (folder missing or read-only?)");
  const QRectF page = writer.pageLayout().paintRectPixels(writer.resolution());
  const double w = page.width(), h = page.height();
  bool first_page = true;
  auto new_page = [&] {
    if (!first_page) writer.newPage();
    first_page = false;
  };
  auto draw_doc = [&](const QString& html) {
    QTextDocument doc;
    doc.documentLayout()->setPaintDevice(&writer);
    doc.setDefaultStyleSheet("body{font-size:9pt} h1{font-size:16pt} h2{font-size:12pt} th{background:#eef1f5}"
                             " td,th{font-size:8pt} .muted{color:#666} .bad{color:#b00020}");
    QFont f("DejaVu Sans");
    f.setPointSizeF(9);
    doc.setDefaultFont(f);
    doc.setHtml(html);
    doc.setPageSize(QSizeF(w, h));
    const int pages = doc.pageCount();
    for (int p = 0; p < pages; ++p) {
      new_page();
      painter.save();
      painter.translate(0, -p * h);
      doc.drawContents(&painter, QRectF(0, p * h, w, h));
      painter.restore();
    }
  };
  draw_doc(summary_html(true));
  // Plots: two per page, as vector graphics.
  const auto kinds = report_plots(m_runs);
  const double gap = 16, ph = (h - gap) / 2;
  for (int i = 0; i < kinds.size(); ++i) {
    if (i % 2 == 0) new_page();
    panel.render(kinds[i], &painter, QRectF(0, (i % 2) * (ph + gap), w, ph));
  }
  for (const auto& r : m_runs) {  // each run with kernel timing and measured roofs: its roofline, a page
    QString why;
    if (!roofline_of(*r, &why)) continue;
    RooflineView roofline;
    roofline.resize(1200, 800);
    roofline.set_run(r);
    new_page();
    roofline.render(&painter, roofline_figure(page));
  }
  for (const auto& r : m_runs) {  // each run over several ranks: the Ranks dock's two plots, a page
    if (!r->has_ranks()) continue;
    RanksPanel ranks;
    ranks.resize(1200, 900);
    ranks.set_run(r);
    new_page();
    ranks.render(RanksPanel::Plot::Memory, &painter, QRectF(0, 0, w, ph));
    ranks.render(RanksPanel::Plot::Time, &painter, QRectF(0, ph + gap, w, ph));
  }
  draw_doc(config_html());
  draw_doc(lessons_html());
  painter.end();
  if (!QFileInfo(path).exists() || QFileInfo(path).size() == 0) throw Error(path.toStdString() + ": PDF not written");
}

namespace {

// An <img> of a plot drawn by `draw` as an embedded SVG (base64), titled `title`.
QString svg_img(const QString& title, const std::function<void(QCPPainter*, const QRectF&)>& draw,
                const QSize size = QSize(1000, 380)) {
  QBuffer buf;
  buf.open(QIODevice::WriteOnly);
  QSvgGenerator gen;
  gen.setOutputDevice(&buf);
  gen.setSize(size);
  gen.setViewBox(QRect(QPoint(0, 0), size));
  gen.setTitle(title);
  {
    QCPPainter p(&gen);
    draw(&p, QRectF(QPointF(0, 0), size));
  }
  return "<img class='plot' alt='" + esc(title) + "' src='data:image/svg+xml;base64," +
         QString::fromLatin1(buf.data().toBase64()) + "'>\n";
}

}  // namespace

void Report::write_html(const QString& path) const {
  PlotPanel panel;
  panel.resize(1200, 900);
  panel.set_smoothing(0.6);
  panel.set_runs(m_runs);
  panel.refresh();

  QString html;
  QTextStream o(&html);
  o << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>TrainLab report</title><style>" << kCss
    << "</style></head><body>";
  o << summary_html(false);
  o << "<h2>Plots</h2>";
  for (PlotKind k : report_plots(m_runs))
    o << svg_img(panel.plot_title(k), [&](QCPPainter* p, const QRectF& target) { panel.render(k, p, target); });
  for (const auto& r : m_runs) {
    QString why;
    if (!roofline_of(*r, &why)) continue;
    RooflineView roofline;
    roofline.resize(1200, 800);
    roofline.set_run(r);
    o << svg_img(roofline.plot_title(), [&](QCPPainter* p, const QRectF& target) { roofline.render(p, target); },
                 QSize(1000, 560));
  }
  for (const auto& r : m_runs) {
    if (!r->has_ranks()) continue;
    RanksPanel ranks;
    ranks.resize(1200, 900);
    ranks.set_run(r);
    for (RanksPanel::Plot k : {RanksPanel::Plot::Memory, RanksPanel::Plot::Time})
      o << svg_img(ranks.plot_title(k), [&](QCPPainter* p, const QRectF& target) { ranks.render(k, p, target); });
  }
  o << config_html();
  o << lessons_html();
  o << "<p class='muted'>Written by TrainLab " TRAINLAB_VERSION ".</p></body></html>\n";
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
    throw Error(path.toStdString() + ": cannot write the HTML report (" + f.errorString().toStdString() + ")");
  f.write(html.toUtf8());
}

void Report::write_csv(const QString& path) const {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
    throw Error(path.toStdString() + ": cannot write the CSV (" + f.errorString().toStdString() + ")");
  QTextStream o(&f);
  o << "run,step,epoch,loss,train_accuracy,val_loss,val_accuracy,lr,samples_per_s,mfu,loss_scale,skipped_steps,wall_s";
  for (size_t c = 0; c < kMemCategoryCount; ++c) o << ",mem_" << mem_category_name(static_cast<MemCategory>(c));
  o << ",mem_total,mem_predicted,sparsity,bits_per_weight,event\n";
  for (const auto& r : m_runs) {
    int vi = 0;
    QString name = r->name;
    name.replace('"', "'");
    QHash<double, QString> events;
    for (const auto& e : r->events) events[e.step] = e.label;
    for (int i = 0; i < r->size(); ++i) {
      // No value (NaN: a diverged step's loss and accuracy) is an empty field, like a step without evaluation.
      auto opt8 = [](double v) { return std::isnan(v) ? QString() : QString::number(v, 'g', 8); };
      QString vl, va;
      while (vi < r->val_step.size() && r->val_step[vi] < r->step[i]) ++vi;
      if (vi < r->val_step.size() && r->val_step[vi] == r->step[i]) {
        vl = opt8(r->val_loss[vi]);
        va = opt8(r->val_acc[vi]);
      }
      o << '"' << name << "\"," << r->step[i] << ',' << QString::number(r->epoch[i], 'g', 8) << ','
        << opt8(r->loss[i]) << ',' << opt8(r->train_acc[i]) << ',' << vl << ','
        << va << ',' << QString::number(r->lr[i], 'g', 8) << ',' << QString::number(r->samples_per_s[i], 'g', 8) << ','
        << QString::number(r->mfu[i], 'g', 6) << ',' << r->loss_scale[i] << ',' << r->skipped_steps[i] << ','
        << QString::number(r->wall_s[i], 'g', 8);
      for (size_t c = 0; c < kMemCategoryCount; ++c) o << ',' << QString::number(r->mem[c][i], 'f', 0);
      auto opt = [](double v) { return std::isfinite(v) ? QString::number(v, 'g', 6) : QString(); };
      o << ',' << QString::number(r->mem_total[i], 'f', 0) << ',' << QString::number(r->mem_predicted[i], 'f', 0) << ','
        << opt(r->sparsity[i]) << ',' << opt(r->bits[i]) << ",\""
        << events.value(r->step[i]).replace('"', "'") << "\"\n";
    }
  }
}

}  // namespace trainlab::app
