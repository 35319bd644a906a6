#include "sensitivity_view.h"

#include <qcustomplot.h>

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPoint>
#include <QPushButton>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>
#include <fstream>
#include <vector>

#include "backend/backend.h"
#include "compress/held_out.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace trainlab::app {

namespace {
using Json = nlohmann::json;

QCustomPlot* heat_plot(QWidget* parent, const QString& x_label, QCPColorMap** map) {
  auto* p = new QCustomPlot(parent);
  p->setMinimumHeight(260);
  *map = new QCPColorMap(p->xAxis, p->yAxis);
  auto* scale = new QCPColorScale(p);
  p->plotLayout()->addElement(0, 1, scale);
  scale->setLabel("held-out accuracy");
  (*map)->setColorScale(scale);
  (*map)->setGradient(QCPColorGradient(QCPColorGradient::gpThermal));
  (*map)->setInterpolate(false);
  p->xAxis->setLabel(x_label);
  p->yAxis->setLabel("layer");
  return p;
}

// Each measured cell's accuracy written on it, dark on the gradient's light end and light on its
// dark end: the best cells are near-white and would otherwise vanish into the plot's background.
void label_cells(QCustomPlot* plot, const QCPColorMap* map, const std::vector<QPoint>& cells) {
  plot->clearItems();
  const QCPRange range = map->dataRange();
  for (const QPoint& c : cells) {
    const double v = map->data()->cell(c.x(), c.y());
    const double shade = range.size() > 0 ? (v - range.lower) / range.size() : 1.0;
    auto* t = new QCPItemText(plot);
    t->position->setType(QCPItemPosition::ptPlotCoords);
    t->position->setCoords(c.x(), c.y());
    t->setText(QString::number(v, 'f', 3));
    t->setColor(shade < 0.55 ? Qt::white : Qt::black);
    t->setClipToAxisRect(true);
  }
}

// One heat map: rows = layers, columns = the options (labelled), cell = accuracy.
void fill_map(QCustomPlot* plot, QCPColorMap* map, const Json& layers, const char* key, const QStringList& columns) {
  const int nx = static_cast<int>(columns.size()), ny = static_cast<int>(layers.size());
  map->data()->setSize(std::max(nx, 1), std::max(ny, 1));
  map->data()->setRange(QCPRange(0, std::max(nx - 1, 0)), QCPRange(0, std::max(ny - 1, 0)));
  auto yt = QSharedPointer<QCPAxisTickerText>::create();
  auto xt = QSharedPointer<QCPAxisTickerText>::create();
  for (int x = 0; x < nx; ++x) xt->addTick(x, columns[x]);
  std::vector<QPoint> measured;
  for (int y = 0; y < ny; ++y) {
    const Json& L = layers[static_cast<size_t>(y)];
    yt->addTick(y, QString::fromStdString(L.at("name").get<std::string>()));
    const Json& points = L.at(key);
    for (int x = 0; x < nx && x < static_cast<int>(points.size()); ++x) {
      map->data()->setCell(x, y, points[static_cast<size_t>(x)].at("accuracy").get<double>());
      measured.emplace_back(x, y);
    }
  }
  plot->xAxis->setTicker(xt);
  plot->yAxis->setTicker(yt);
  map->rescaleDataRange(true);
  label_cells(plot, map, measured);
  plot->rescaleAxes();
  plot->xAxis->setRange(-0.5, nx - 0.5);
  plot->yAxis->setRange(-0.5, ny - 0.5);
  plot->replot();
}

QStringList bit_columns(const Json& t) {
  QStringList c;
  if (!t.contains("layers") || t["layers"].empty()) return c;
  for (const Json& p : t["layers"][0].at("bits")) c << QString("%1-bit").arg(p.at("bits").get<int>());
  return c;
}

QStringList sparsity_columns(const Json& t) {
  QStringList c;
  if (!t.contains("layers") || t["layers"].empty()) return c;
  for (const Json& p : t["layers"][0].at("sparsity")) c << QString("%1%").arg(100.0 * p.at("sparsity").get<double>(), 0, 'g', 3);
  return c;
}

QString weights_file(const QString& path) { return QFileInfo(path).isDir() ? path + "/model.safetensors" : path; }
}  // namespace

SensitivityView::SensitivityView(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  auto* wrow = new QHBoxLayout;
  m_weights = new QLineEdit(this);
  m_weights->setPlaceholderText("a run folder or its model.safetensors (fp32)");
  auto* browse = new QToolButton(this);
  browse->setText("...");
  connect(browse, &QToolButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, "fp32 weights", m_weights->text(), "Weights (*.safetensors)");
    if (!f.isEmpty()) m_weights->setText(f);
  });
  wrow->addWidget(m_weights, 1);
  wrow->addWidget(browse);
  form->addRow("Weights", wrow);
  m_data = new QComboBox(this);
  m_data->addItems({"validation", "test"});
  m_data->setToolTip("Held-out data: the last 20% of the training split, or the test split (selecting on the test set)");
  form->addRow("Held-out data", m_data);
  auto* brow = new QHBoxLayout;
  m_budget_kind = new QComboBox(this);
  m_budget_kind->setObjectName("budget_kind");
  m_budget_kind->addItems({"bits", "bytes", "sparsity"});
  m_budget = new QDoubleSpinBox(this);
  m_budget->setObjectName("budget");
  m_budget->setRange(0.01, 1e12);
  m_budget->setDecimals(2);
  m_budget->setValue(3.0);
  m_budget->setToolTip("bits: average code bits a weight (2..8); bytes: tensor bytes of the quantized file; "
                       "sparsity: fraction of the weights removed (0..1)");
  m_allocate = new QPushButton("Allocate", this);
  brow->addWidget(m_budget_kind);
  brow->addWidget(m_budget, 1);
  brow->addWidget(m_allocate);
  form->addRow("Budget", brow);
  m_method = new QComboBox(this);
  m_method->setObjectName("method");
  m_method->addItems({"rtn", "gptq", "awq"});
  m_method->setToolTip("How the allocated files are quantized (quant.method): rtn rounds to nearest; gptq spreads each "
                       "rounding error over the columns not yet quantized (second-order, calibrated); awq scales the "
                       "input channels by their mean |x|^alpha first. Calibration: quant.calibration batches or windows "
                       "of the training split, with quant.damp and quant.act_order, from the run's config. The "
                       "sensitivity table is measured by rounding to nearest.");
  form->addRow("Quantized by", m_method);
  v->addLayout(form);
  auto* row = new QHBoxLayout;
  m_measure = new QPushButton("Measure sensitivity", this);
  m_status = new QLabel(this);
  m_status->setObjectName("status");
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  row->addWidget(m_measure);
  row->addWidget(m_status, 1);
  v->addLayout(row);
  m_bits_plot = heat_plot(this, "bits (one layer quantized, per-channel)", &m_bits_map);
  m_sparsity_plot = heat_plot(this, "sparsity (one layer magnitude-pruned)", &m_sparsity_map);
  v->addWidget(m_bits_plot, 1);
  v->addWidget(m_sparsity_plot, 1);
  connect(m_measure, &QPushButton::clicked, this, [this] { measure(); });
  connect(m_allocate, &QPushButton::clicked, this, [this] { allocate(m_budget_kind->currentText(), m_budget->value()); });
}

SensitivityView::~SensitivityView() {
  if (!m_thread) return;
  m_thread->wait();
  delete m_thread.data();
}

void SensitivityView::set_weights(const QString& path) { m_weights->setText(weights_file(path)); }

void SensitivityView::run(const QString& what, std::function<Json()> work) {
  m_busy = true;
  m_measure->setEnabled(false);
  m_allocate->setEnabled(false);
  m_status->setText(what + "...");
  QPointer<SensitivityView> self(this);
  const bool is_allocation = what.startsWith("Allocat");
  QThread* t = QThread::create([self, work, is_allocation] {
    Json result;
    QString message;
    bool ok = false;
    try {
      result = work();
      ok = true;
    } catch (const std::exception& e) {
      message = QString::fromStdString(describe_exception(e, "measuring sensitivity"));
    }
    QMetaObject::invokeMethod(
        qApp, [self, ok, message, result, is_allocation] { if (self) self->done(ok, message, result, is_allocation); },
        Qt::QueuedConnection);
  });
  connect(t, &QThread::finished, t, &QObject::deleteLater);
  t->setObjectName("sensitivity");
  m_thread = t;
  t->start();
}

bool SensitivityView::measure() {
  const std::string path = m_weights->text().toStdString(), split = m_data->currentText().toStdString();
  if (m_busy || path.empty()) return false;
  run("Measuring", [path, split] {
    const SafeTensorsFile f = read_safetensors(path);
    const Config c = weights_config(f, path);
    auto be = create_backend("cpu");
    const HeldOutData h = held_out_data(*be, c, split, path);
    Json j = measure_sensitivity(f, path, h.eval, SensitivityOptions{}).to_json();
    j["weights"] = path;
    j["held_out"] = h.description;
    // Beside the weights, where the report finds it.
    write_file_atomic((QFileInfo(QString::fromStdString(path)).absolutePath() + "/sensitivity.json").toStdString(), j.dump(2));
    return j;
  });
  return true;
}

bool SensitivityView::allocate(const QString& kind, double value) {
  const std::string path = m_weights->text().toStdString(), split = m_data->currentText().toStdString();
  if (m_busy || path.empty()) return false;
  AllocateRequest r;
  r.budget = {kind == "bytes" ? BudgetKind::Bytes : kind == "sparsity" ? BudgetKind::Sparsity : BudgetKind::Bits, value};
  r.split = split;
  r.method.method = m_method->currentText().toStdString();
  r.out = (QFileInfo(QString::fromStdString(path)).absolutePath() + QString("/allocated-%1-%2.safetensors").arg(kind).arg(value))
              .toStdString();
  run("Allocating", [path, r]() mutable {
    const SafeTensorsFile f = read_safetensors(path);
    auto be = create_backend("cpu");
    const Config c = weights_config(f, path);
    r.calibration = static_cast<int>(c.get_int("quant.calibration"));  // the run's keys, as trainlab-cli's defaults
    r.method.damp = c.get_float("quant.damp");
    r.method.act_order = c.get_bool("quant.act_order");
    return allocation_report(*be, f, path, c, r);
  });
  return true;
}

void SensitivityView::done(bool ok, const QString& message, const Json& result, bool is_allocation) {
  m_busy = false;
  m_measure->setEnabled(true);
  m_allocate->setEnabled(true);
  if (!ok) {
    m_status->setText("Cannot measure: " + message);
    emit finished(false, message);
    return;
  }
  QString text;
  if (is_allocation) {
    m_allocation = result;
    show_table(result.at("sensitivity"));
    const Json &a = result.at("allocated_test"), &u = result.at("uniform_test");
    QString method = QString::fromStdString(result.value("method", std::string()));
    if (result.contains("calibration"))
      method += ", calibrated on " + QString::fromStdString(result.at("calibration").get<std::string>());
    text = QString("%1%7: allocated test accuracy %2, uniform %3 (kept: %4, held-out %5); wrote %6")
               .arg(QString::fromStdString(result.at("budget").get<std::string>()))
               .arg(a.at("accuracy").get<double>(), 0, 'f', 4)
               .arg(u.at("accuracy").get<double>(), 0, 'f', 4)
               .arg(QString::fromStdString(result.at("kept").get<std::string>()))
               .arg(QString::fromStdString(result.at("held_out").get<std::string>()))
               .arg(QString::fromStdString(result.at("out").get<std::string>()))
               .arg(method.isEmpty() ? QString() : " (" + method + ")");
  } else {
    show_table(result);
    text = QString("fp32 held-out accuracy %1 (%2)")
               .arg(result.at("baseline").at("accuracy").get<double>(), 0, 'f', 4)
               .arg(QString::fromStdString(result.value("held_out", std::string())));
  }
  m_status->setText(text);
  emit finished(true, text);
}

void SensitivityView::show_table(const Json& t) {
  m_table = t;
  fill_map(m_bits_plot, m_bits_map, t.at("layers"), "bits", bit_columns(t));
  fill_map(m_sparsity_plot, m_sparsity_map, t.at("layers"), "sparsity", sparsity_columns(t));
}

QString sensitivity_report_html(const QString& run_dir, const QString& run_name) {
  if (run_dir.isEmpty()) return {};
  QFile f(run_dir + "/sensitivity.json");
  if (!f.open(QIODevice::ReadOnly)) return {};
  Json t;
  try {
    t = Json::parse(f.readAll().toStdString());
    if (!t.contains("layers") || !t.contains("baseline")) return {};
  } catch (const std::exception&) {
    return {};
  }
  QString h;
  QTextStream o(&h);
  const double base = t["baseline"].value("accuracy", 0.0);
  o << "<h2>Sensitivity: " << run_name.toHtmlEscaped() << "</h2><p class='muted'>Held-out accuracy with one layer at a "
    << "time quantized or pruned (" << QString::fromStdString(t.value("held_out", std::string())).toHtmlEscaped()
    << "); fp32: " << QString::number(base, 'f', 4) << ". Darker cells lose more.</p>";
  for (const char* key : {"bits", "sparsity"}) {
    const QStringList cols = std::string(key) == "bits" ? bit_columns(t) : sparsity_columns(t);
    if (cols.isEmpty()) continue;
    o << "<table cellspacing='0' cellpadding='3' border='1'><tr><th>layer</th>";
    for (const QString& c : cols) o << "<th>" << c << "</th>";
    o << "</tr>";
    for (const Json& L : t["layers"]) {
      o << "<tr><td>" << QString::fromStdString(L.value("name", std::string())).toHtmlEscaped() << "</td>";
      for (const Json& p : L.at(key)) {
        const double acc = p.value("accuracy", 0.0), drop = std::clamp((base - acc) / std::max(base, 1e-9), 0.0, 1.0);
        const int shade = static_cast<int>(255 - 200 * drop);
        o << "<td align='right' bgcolor='" << QColor(255, shade, shade).name() << "'>" << QString::number(acc, 'f', 3) << "</td>";
      }
      o << "</tr>";
    }
    o << "</table><br>";
  }
  return h;
}

}  // namespace trainlab::app
