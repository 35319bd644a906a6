#include "sweep_view.h"

#include <QEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMap>
#include <QMessageBox>
#include <QMouseEvent>
#include <QSplitter>
#include <QTableWidget>
#include <QTextStream>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "plot_style.h"

namespace trainlab::app {

namespace {

// Splits one CSV line; fields may be quoted ("" inside quotes is a quote).
QStringList split_csv(const QString& line) {
  QStringList out;
  QString cur;
  bool quoted = false;
  for (int i = 0; i < line.size(); ++i) {
    const QChar c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out << cur;
      cur.clear();
    } else {
      cur += c;
    }
  }
  out << cur;
  return out;
}

bool is_quant(const SweepRow& r) { return r.method.contains("ptq") || r.method == "qat"; }
bool is_prune(const SweepRow& r) { return r.method.startsWith("prune") || r.method == "lottery-ticket"; }
bool is_baseline(const SweepRow& r) { return r.method == "fp32"; }

// Post-training rows by method (rtn: "ptq", gptq: "ptq-gptq", awq: "ptq-awq") and granularity.
QString quant_series(const SweepRow& r) {
  if (r.method == "ptq") return "rtn " + r.granularity;
  if (r.method == "ptq-gptq" || r.method == "ptq-awq") return r.method.mid(4) + " " + r.granularity;
  return r.method;
}
QString prune_series(const SweepRow& r) { return r.granularity == "global" ? r.method + " (global)" : r.method; }
QString bytes_series(const SweepRow& r) {
  if (is_quant(r)) return "quantization";
  if (is_prune(r)) return "pruning";
  return "other (students)";
}

const char* kColumns[] = {"method", "granularity", "bits", "sparsity", "test_accuracy", "model_bytes", "bits_per_weight"};
const QCPScatterStyle::ScatterShape kShapes[] = {QCPScatterStyle::ssCircle, QCPScatterStyle::ssSquare,
                                                 QCPScatterStyle::ssDiamond, QCPScatterStyle::ssTriangle,
                                                 QCPScatterStyle::ssCross, QCPScatterStyle::ssPlus,
                                                 QCPScatterStyle::ssTriangleInverted, QCPScatterStyle::ssStar};

}  // namespace

bool load_sweep_csv(const QString& path, QVector<SweepRow>* rows, QString* error) {
  // Only a regular file of sane size: a device (/dev/zero) would be read as one endless line.
  const QFileInfo info(path);
  constexpr qint64 kMaxBytes = 64 << 20;
  if (info.exists() && (!info.isFile() || info.size() > kMaxBytes)) {
    *error = QString("%1: not a sweep table (expected a regular file of at most %2 bytes)").arg(path).arg(kMaxBytes);
    return false;
  }
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) {
    *error = QString("%1: cannot open (%2)").arg(path, f.errorString());
    return false;
  }
  QTextStream in(&f);
  const QStringList header = split_csv(in.readLine().trimmed());
  QMap<QString, int> col;
  for (int i = 0; i < header.size(); ++i) col[header[i].trimmed()] = i;
  for (const char* c : kColumns) {
    if (!col.contains(c)) {
      *error = QString("%1: line 1: missing column \"%2\" (not a sweep.csv?)").arg(path, c);
      return false;
    }
  }
  QVector<SweepRow> out;
  int line_no = 1;
  while (!in.atEnd()) {
    const QString line = in.readLine();
    ++line_no;
    if (line.trimmed().isEmpty()) continue;
    const QStringList f2 = split_csv(line);
    if (f2.size() < header.size()) {
      *error = QString("%1: line %2: %3 fields, expected %4").arg(path).arg(line_no).arg(f2.size()).arg(header.size());
      return false;
    }
    SweepRow r;
    r.method = f2[col["method"]];
    r.granularity = f2[col["granularity"]];
    if (col.contains("note")) r.note = f2[col["note"]];
    const struct { const char* name; double* dst; } nums[] = {
        {"bits", &r.bits}, {"sparsity", &r.sparsity}, {"test_accuracy", &r.accuracy},
        {"model_bytes", &r.model_bytes}, {"bits_per_weight", &r.bits_per_weight}};
    for (const auto& n : nums) {
      bool ok = false;
      *n.dst = f2[col[n.name]].toDouble(&ok);
      if (!ok || !std::isfinite(*n.dst)) {
        *error = QString("%1: line %2: column \"%3\" is not a number (expected a finite number)")
                     .arg(path)
                     .arg(line_no)
                     .arg(QLatin1String(n.name));
        return false;
      }
    }
    out.push_back(r);
  }
  if (out.isEmpty()) {
    *error = QString("%1: no rows").arg(path);
    return false;
  }
  *rows = out;
  return true;
}

SweepView::SweepView(QWidget* parent) : QWidget(parent) {
  setWindowTitle("Compression sweep");
  auto* lay = new QVBoxLayout(this);
  m_title = new QLabel("No sweep loaded (View > Compression sweep...)", this);
  lay->addWidget(m_title);
  auto* split = new QSplitter(Qt::Vertical, this);
  auto* plots = new QWidget(split);
  auto* row = new QHBoxLayout(plots);
  row->setContentsMargins(0, 0, 0, 0);
  const char* xs[] = {"bits per weight", "sparsity (%)", "model bytes"};
  for (int i = 0; i < 3; ++i) {
    auto* p = new QCustomPlot(plots);
    p->setMinimumSize(320, 260);
    p->xAxis->setLabel(xs[i]);
    p->yAxis->setLabel("test accuracy (%)");
    p->legend->setVisible(true);
    p->legend->setFont(QFont(font().family(), 8));
    // The accuracies sit near the top: a legend there covered them (to the emptiest corner).
    connect(p, &QCustomPlot::afterReplot, p, [p] { place_legend_clear(p); });
    p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    p->setMouseTracking(true);
    p->installEventFilter(this);
    m_plots[i] = p;
    row->addWidget(p);
  }
  m_plots[Bytes]->xAxis->setScaleType(QCPAxis::stLogarithmic);
  m_plots[Bytes]->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  m_table = new QTableWidget(split);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->verticalHeader()->setVisible(false);
  split->addWidget(plots);
  split->addWidget(m_table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  lay->addWidget(split);
  apply_palette();
}

bool SweepView::load(const QString& path) {
  QVector<SweepRow> rows;
  if (!load_sweep_csv(path, &rows, &m_error)) return false;
  m_error.clear();
  m_rows = rows;
  m_title->setText(QString("%1: %2 rows").arg(QFileInfo(path).absoluteFilePath()).arg(m_rows.size()));
  rebuild();
  return true;
}

void SweepView::open_with_dialog() {
  const QString path = QFileDialog::getOpenFileName(this, "Open compression sweep", QString(),
                                                    "Sweep tables (sweep.csv *.csv);;All files (*)");
  if (path.isEmpty()) return;
  if (!load(path)) QMessageBox::warning(this, "Compression sweep", m_error);
}

QCPGraph* SweepView::graph(Plot p, const QString& name) const {
  for (int i = 0; i < m_plots[p]->graphCount(); ++i)
    if (m_plots[p]->graph(i)->name() == name) return m_plots[p]->graph(i);
  return nullptr;
}

void SweepView::rebuild() {
  const SweepRow* base = nullptr;
  for (const SweepRow& r : m_rows)
    if (is_baseline(r)) base = &r;
  for (int pi = 0; pi < 3; ++pi) {
    QCustomPlot* p = m_plots[pi];
    p->clearGraphs();
    // series name -> (x, y) points, in order of first appearance
    QStringList order;
    QMap<QString, QVector<QPair<double, double>>> pts;
    for (const SweepRow& r : m_rows) {
      QString s;
      double x = 0;
      if (pi == Bits && is_quant(r)) {
        s = quant_series(r);
        x = r.bits_per_weight;
      } else if (pi == Sparsity && is_prune(r)) {
        s = prune_series(r);
        x = r.sparsity;
      } else if (pi == Bytes && !is_baseline(r)) {
        s = bytes_series(r);
        x = r.model_bytes;
      } else {
        continue;
      }
      if (!pts.contains(s)) order << s;
      pts[s].push_back({x, r.accuracy * 100.0});
    }
    for (int si = 0; si < order.size(); ++si) {
      auto v = pts[order[si]];
      std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      QCPGraph* g = p->addGraph();
      g->setName(order[si]);
      const QColor c = run_color(si);
      g->setPen(QPen(c, 1.5));
      g->setScatterStyle(QCPScatterStyle(kShapes[si % 8], c, c, 7));
      if (pi == Bytes) g->setLineStyle(QCPGraph::lsNone);
      QVector<double> xs, ys;
      for (const auto& pt : v) {
        xs << pt.first;
        ys << pt.second;
      }
      g->setData(xs, ys, true);
    }
    p->rescaleAxes();
    QCPRange xr = p->xAxis->range();
    if (pi == Bytes) {
      if (base) xr.upper = std::max(xr.upper, base->model_bytes);
      xr = QCPRange(xr.lower / 1.5, xr.upper * 1.5);
    } else {
      const double pad = std::max(0.5, xr.size() * 0.05);
      xr = QCPRange(xr.lower - pad, xr.upper + pad);
    }
    p->xAxis->setRange(xr);
    if (base) {
      QCPGraph* g = p->addGraph();
      g->setName(QString("fp32 baseline (%1 %)").arg(base->accuracy * 100.0, 0, 'f', 2));
      g->setProperty("baseline", true);
      QPen pen(palette().color(QPalette::Text), 1.2, Qt::DashLine);
      g->setPen(pen);
      g->setData(QVector<double>{xr.lower, xr.upper}, QVector<double>{base->accuracy * 100.0, base->accuracy * 100.0});
    }
    QCPRange yr = p->yAxis->range();
    if (base) yr.expand(base->accuracy * 100.0);
    p->yAxis->setRange(std::max(0.0, yr.lower - 2), std::min(100.5, yr.upper + 2));
    p->replot();
  }

  const QStringList heads = {"method", "granularity", "bits", "sparsity %", "test acc %", "model bytes", "bits/weight", "note"};
  m_table->clear();
  m_table->setColumnCount(heads.size());
  m_table->setHorizontalHeaderLabels(heads);
  m_table->setRowCount(m_rows.size());
  for (int i = 0; i < m_rows.size(); ++i) {
    const SweepRow& r = m_rows[i];
    const QStringList cells = {r.method, r.granularity, QString::number(r.bits), QString::number(r.sparsity, 'f', 2),
                               QString::number(r.accuracy * 100.0, 'f', 2), QString::number(r.model_bytes, 'f', 0),
                               QString::number(r.bits_per_weight, 'f', 3), r.note};
    for (int c = 0; c < cells.size(); ++c) m_table->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  m_table->resizeColumnsToContents();
}

void SweepView::apply_palette() {
  for (QCustomPlot* p : m_plots) {
    style_plot(p, palette());
    for (int i = 0; i < p->graphCount(); ++i) {
      QCPGraph* g = p->graph(i);
      if (g->property("baseline").toBool()) g->setPen(QPen(palette().color(QPalette::Text), 1.2, Qt::DashLine));
    }
    p->replot();
  }
}

void SweepView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) apply_palette();
  QWidget::changeEvent(e);
}

// Hover: the nearest point within 12 px names its series and values.
bool SweepView::eventFilter(QObject* o, QEvent* e) {
  auto* p = qobject_cast<QCustomPlot*>(o);
  if (p && e->type() == QEvent::MouseMove) {
    const QPointF pos = static_cast<QMouseEvent*>(e)->position();
    double best = 12.0;
    QString text;
    for (int i = 0; i < p->graphCount(); ++i) {
      QCPGraph* g = p->graph(i);
      if (g->property("baseline").toBool()) continue;
      for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
        const QPointF q = g->coordsToPixels(it->key, it->value);
        const double d = std::hypot(q.x() - pos.x(), q.y() - pos.y());
        if (d < best) {
          best = d;
          text = QString("%1\n%2 = %3\naccuracy %4 %")
                     .arg(g->name(), p->xAxis->label())
                     .arg(it->key, 0, 'g', 6)
                     .arg(it->value, 0, 'f', 2);
        }
      }
    }
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(p->mapToGlobal(pos.toPoint()), text, p);
  }
  return QWidget::eventFilter(o, e);
}

}  // namespace trainlab::app
