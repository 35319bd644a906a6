#include "parallel_coords_view.h"

#include <QHBoxLayout>
#include <QVBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "plot_style.h"
#include "run_series.h"

namespace trainlab::app {

namespace {

struct Metric {
  const char* name;
  const char* key;  // summary.json
};
const Metric kMetrics[] = {
    {"test accuracy", "test_accuracy"}, {"test loss", "test_loss"}, {"samples/s", "samples_per_s"}, {"peak memory", ""}};

// An axis from per-run values: numbers scaled min..max (log when they span > 20x and are > 0),
// else text values spread evenly in sorted order.
ParallelCoordsPlot::Axis make_axis(const QString& name, const QVector<Json>& values) {
  ParallelCoordsPlot::Axis a;
  a.name = name;
  bool numeric = true;
  for (const Json& v : values) numeric = numeric && (v.is_number() || v.is_null());
  if (numeric) {
    double lo = INFINITY, hi = -INFINITY;
    for (const Json& v : values)
      if (v.is_number() && std::isfinite(v.get<double>())) {
        lo = std::min(lo, v.get<double>());
        hi = std::max(hi, v.get<double>());
      }
    const bool log = lo > 0 && hi / lo > 20;
    auto t = [&](double x) { return log ? std::log(x) : x; };
    for (const Json& v : values) {
      const double x = v.is_number() ? v.get<double>() : NAN;
      a.labels << (std::isfinite(x) ? QString::number(x, 'g', 4) : QString("no value"));
      a.position << (!std::isfinite(x) ? NAN : hi > lo ? (t(x) - t(lo)) / (t(hi) - t(lo)) : 0.5);
    }
    if (std::isfinite(lo)) {
      a.low = QString::number(lo, 'g', 4);
      a.high = QString::number(hi, 'g', 4) + (log ? "  (log)" : "");
    }
    return a;
  }
  std::set<QString> distinct;
  for (const Json& v : values) distinct.insert(json_value_text(v));
  const QStringList sorted(distinct.begin(), distinct.end());
  for (const Json& v : values) {
    const QString text = json_value_text(v);
    a.labels << text;
    a.position << (sorted.size() > 1 ? sorted.indexOf(text) / double(sorted.size() - 1) : 0.5);
  }
  a.low = sorted.value(0);
  a.high = sorted.size() > 1 ? sorted.back() : QString();
  return a;
}

}  // namespace

ParallelCoordsPlot::ParallelCoordsPlot(QWidget* parent) : QWidget(parent) {
  setObjectName("parallel_coords_plot");
  setMinimumSize(480, 300);
  setAutoFillBackground(true);
  setBackgroundRole(QPalette::Base);
}

void ParallelCoordsPlot::set_data(QVector<Axis> axes, QStringList run_names) {
  m_axes = std::move(axes);
  m_names = std::move(run_names);
  update();
}

void ParallelCoordsPlot::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QColor text = palette().color(QPalette::Text);
  if (m_axes.size() < 2) {
    p.setPen(text);
    p.drawText(rect(), Qt::AlignCenter, "Select two or more runs in the runs table.");
    return;
  }
  const QFontMetrics fm(font());
  const int top = fm.height() * 2 + 8, bottom = height() - fm.height() * 2 - 8;
  const int left = 70, right = width() - 150;  // room on the right for the run names
  auto x_of = [&](int i) { return left + (right - left) * i / double(m_axes.size() - 1); };
  auto y_of = [&](double pos) { return bottom - (bottom - top) * pos; };
  for (int r = 0; r < m_names.size(); ++r) {
    QPainterPath path;
    bool drawing = false;
    for (int i = 0; i < m_axes.size(); ++i) {
      const double pos = m_axes[i].position.value(r, NAN);
      if (!std::isfinite(pos)) {
        drawing = false;
        continue;
      }
      const QPointF pt(x_of(i), y_of(pos));
      drawing ? path.lineTo(pt) : path.moveTo(pt);
      drawing = true;
    }
    p.setPen(QPen(run_color(r), 2));
    p.drawPath(path);
    p.drawText(QPointF(right + 12, top + fm.height() * (r + 1)), m_names[r]);
  }
  for (int i = 0; i < m_axes.size(); ++i) {
    const double x = x_of(i);
    p.setPen(QPen(text, 1));
    p.drawLine(QPointF(x, top), QPointF(x, bottom));
    const QString& n = m_axes[i].name;
    p.drawText(QRectF(x - 80, 2, 160, fm.height() + 2), Qt::AlignCenter, fm.elidedText(n, Qt::ElideLeft, 160));
    p.drawText(QRectF(x - 80, top - fm.height() - 4, 160, fm.height()), Qt::AlignCenter, m_axes[i].high);
    p.drawText(QRectF(x - 80, bottom + 4, 160, fm.height()), Qt::AlignCenter, m_axes[i].low);
  }
}

ParallelCoordsView::ParallelCoordsView(QWidget* parent) : QWidget(parent) {
  setObjectName("parallel_coords_view");
  setWindowTitle("Parallel coordinates");
  auto* h = new QHBoxLayout(this);
  auto* side = new QVBoxLayout;
  side->addWidget(new QLabel("Config keys (axes):", this));
  m_keys = new QListWidget(this);
  m_keys->setObjectName("parallel_coords_keys");
  m_keys->setMaximumWidth(260);
  connect(m_keys, &QListWidget::itemChanged, this, [this] { rebuild(); });
  side->addWidget(m_keys, 1);
  m_message = new QLabel(this);
  m_message->setWordWrap(true);
  m_message->setMaximumWidth(260);
  side->addWidget(m_message);
  h->addLayout(side);
  m_plot = new ParallelCoordsPlot(this);
  h->addWidget(m_plot, 1);
}

QStringList ParallelCoordsView::metric_names() {
  QStringList out;
  for (const auto& m : kMetrics) out << m.name;
  return out;
}

void ParallelCoordsView::set_runs(const QVector<RunRow>& runs) {
  m_runs = runs;
  // The keys in which the runs differ.
  std::map<std::string, std::set<std::string>> values;
  for (const auto& r : runs) {
    const Json flat = flatten_config(r.config);
    for (auto it = flat.begin(); it != flat.end(); ++it)
      if (it.key().rfind("run.", 0) != 0) values[it.key()].insert(it.value().dump());
  }
  const QSignalBlocker block(m_keys);
  m_keys->clear();
  for (const auto& [key, distinct] : values) {
    if (distinct.size() < 2 && runs.size() > 1) continue;
    auto* it = new QListWidgetItem(QString::fromStdString(key), m_keys);
    it->setFlags(it->flags() | Qt::ItemIsUserCheckable);
    it->setCheckState(Qt::Checked);
  }
  rebuild();
}

QStringList ParallelCoordsView::offered_keys() const {
  QStringList out;
  for (int i = 0; i < m_keys->count(); ++i) out << m_keys->item(i)->text();
  return out;
}

void ParallelCoordsView::set_keys(const QStringList& keys) {
  {
    const QSignalBlocker block(m_keys);
    for (int i = 0; i < m_keys->count(); ++i)
      m_keys->item(i)->setCheckState(keys.contains(m_keys->item(i)->text()) ? Qt::Checked : Qt::Unchecked);
  }
  rebuild();
}

QString ParallelCoordsView::message() const { return m_message->text(); }

void ParallelCoordsView::rebuild() {
  QVector<ParallelCoordsPlot::Axis> axes;
  QStringList names;
  QVector<Json> flats;
  for (const auto& r : m_runs) {
    names << r.name;
    flats << flatten_config(r.config);
  }
  for (int i = 0; i < m_keys->count(); ++i) {
    if (m_keys->item(i)->checkState() != Qt::Checked) continue;
    const std::string key = m_keys->item(i)->text().toStdString();
    QVector<Json> v;
    for (const Json& f : flats) v << (f.contains(key) ? f[key] : Json());
    axes << make_axis(QString::fromStdString(key), v);
  }
  for (const auto& m : kMetrics) {
    QVector<Json> v;
    for (const auto& r : m_runs) {
      const double x = *m.key ? summary_number(r.summary, m.key) : summary_peak_bytes(r.summary);
      v << (std::isfinite(x) ? Json(x) : Json());
    }
    axes << make_axis(m.name, v);
  }
  m_message->setText(m_runs.size() < 2 ? "Select two or more runs in the runs table (View > Parallel coordinates "
                                         "draws the selection, or the ticked runs)."
                                       : QString("%1 runs; unfinished runs have no final metrics.").arg(m_runs.size()));
  m_plot->set_data(std::move(axes), names);
}

}  // namespace trainlab::app
