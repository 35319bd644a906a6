#include "lessons_view.h"

#include <QApplication>
#include <QEvent>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "plot_style.h"
#include "util/error.h"

namespace trainlab::app {

QString format_lesson_number(double v) {
  if (std::isnan(v)) return "none";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return QString::number(v, 'g', 7);
}

LessonSpinBox::LessonSpinBox(const LessonInput& input, QWidget* parent)
    : QDoubleSpinBox(parent), m_integer(input.integer) {
  setDecimals(320);  // no rounding of 1e-20; the text is textFromValue's
  setRange(input.lo, input.hi);
  setValue(input.def);
  setKeyboardTracking(false);  // recompute on Enter, focus out or a step, not on every key
  if (m_integer)
    setSingleStep(1.0);
  else
    setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
  setToolTip(QString::fromStdString(input.help + (input.help.empty() ? "" : "; ")) +
             QString("%1 in [%2, %3]").arg(m_integer ? "an integer" : "a number").arg(input.lo).arg(input.hi));
  setObjectName(QString::fromStdString("input_" + input.key));
  setMinimumWidth(140);
}

QString LessonSpinBox::textFromValue(double v) const {
  return m_integer ? QString::number(std::llround(v)) : QString::number(v, 'g', 6);
}

double LessonSpinBox::valueFromText(const QString& text) const { return text.trimmed().toDouble(); }

QValidator::State LessonSpinBox::validate(QString& text, int&) const {
  bool ok = false;
  const double v = text.trimmed().toDouble(&ok);
  if (!ok) return QValidator::Intermediate;  // "1e", "-" on the way to a number
  if (m_integer && v != std::floor(v)) return QValidator::Invalid;
  return v >= minimum() && v <= maximum() ? QValidator::Acceptable : QValidator::Intermediate;
}

LessonsView::LessonsView(QWidget* parent) : QWidget(parent) {
  setWindowTitle("Lessons");
  auto* root = new QHBoxLayout(this);
  m_list = new QListWidget(this);
  m_list->setObjectName("lesson_list");
  for (const Lesson& l : lesson_registry()) {
    auto* item = new QListWidgetItem(QString::fromStdString(l.title), m_list);
    item->setData(Qt::UserRole, QString::fromStdString(l.name));
    item->setToolTip(QString::fromStdString("trainlab-cli lesson " + l.name));
  }
  m_list->setMinimumWidth(m_list->sizeHintForColumn(0) + 24);
  m_list->setMaximumWidth(440);
  root->addWidget(m_list);

  auto* right = new QWidget(this);
  auto* col = new QVBoxLayout(right);
  col->setContentsMargins(0, 0, 0, 0);
  m_title = new QLabel(right);
  QFont tf = m_title->font();
  tf.setPointSizeF(tf.pointSizeF() * 1.3);
  tf.setBold(true);
  m_title->setFont(tf);
  m_text = new QLabel(right);
  m_text->setWordWrap(true);
  m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* box = new QGroupBox("Inputs", right);
  auto* box_lay = new QHBoxLayout(box);
  m_inputs = new QWidget(box);
  m_form = new QFormLayout(m_inputs);
  m_form->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
  box_lay->addWidget(m_inputs, 1);
  auto* reset = new QPushButton("Defaults", box);
  reset->setObjectName("lesson_defaults");
  reset->setToolTip("Put every input of this lesson back to its default");
  box_lay->addWidget(reset, 0, Qt::AlignTop);
  m_error = new QLabel(right);
  m_error->setObjectName("lesson_error");
  m_error->setWordWrap(true);
  m_error->setStyleSheet("color:#c62828");
  m_error->hide();
  auto* split = new QSplitter(Qt::Horizontal, right);
  m_table = new QTableWidget(split);
  m_table->setObjectName("lesson_table");
  m_table->setColumnCount(2);
  m_table->setHorizontalHeaderLabels({"figure", "value"});
  m_table->verticalHeader()->setVisible(false);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_plot = new QCustomPlot(split);
  m_plot->setObjectName("lesson_plot");
  m_plot->setMinimumSize(420, 300);
  m_plot->legend->setVisible(true);
  m_plot->legend->setFont(QFont(font().family(), 8));
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->plotLayout()->insertRow(0);
  m_plot->plotLayout()->addElement(0, 0, new QCPTextElement(m_plot, QString(), QFont(font().family(), 10, QFont::Bold)));
  // The legend in a row of its own under the axes, never on a curve (inside the axes it sat on
  // the quant-outlier lesson's error curve, whatever corner it took on another lesson's).
  auto* legend_row = new QCPLayoutGrid;
  m_plot->plotLayout()->addElement(2, 0, legend_row);
  legend_row->setMargins(QMargins(6, 0, 6, 4));
  legend_row->addElement(0, 0, m_plot->legend);
  m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
  m_plot->legend->setWrap(3);
  m_plot->legend->setMaximumSize(QWIDGETSIZE_MAX / 2, QWIDGETSIZE_MAX / 2);  // an empty legend must not narrow the plot
  m_plot->plotLayout()->setRowStretchFactor(2, 0.001);
  split->addWidget(m_table);
  split->addWidget(m_plot);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  col->addWidget(m_title);
  col->addWidget(m_text);
  col->addWidget(box);
  col->addWidget(m_error);
  col->addWidget(split, 1);
  root->addWidget(right, 1);

  connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
    if (row >= 0) select_lesson(m_list->item(row)->data(Qt::UserRole).toString());
  });
  connect(reset, &QPushButton::clicked, this, [this] {
    const Lesson& l = find_lesson(m_current.toStdString());
    m_values[l.name] = l.defaults();
    build_inputs(l);
    recompute();
  });
  style_plot(m_plot, palette());
  m_list->setCurrentRow(0);
}

bool LessonsView::select_lesson(const QString& name) {
  const std::string n = name.toStdString();
  const Lesson* lesson = nullptr;
  for (const Lesson& l : lesson_registry())
    if (l.name == n) lesson = &l;
  if (!lesson) return false;
  if (m_current == name) return true;
  m_current = name;
  for (int i = 0; i < m_list->count(); ++i)
    if (m_list->item(i)->data(Qt::UserRole).toString() == name && m_list->currentRow() != i) {
      QSignalBlocker block(m_list);
      m_list->setCurrentRow(i);
    }
  if (!m_values.count(n)) m_values[n] = lesson->defaults();
  m_title->setText(QString::fromStdString(lesson->title));
  m_text->setText(QString::fromStdString(lesson->text));
  build_inputs(*lesson);
  recompute();
  return true;
}

void LessonsView::build_inputs(const Lesson& lesson) {
  while (m_form->rowCount() > 0) m_form->removeRow(0);
  m_spins.clear();
  const LessonValues& v = m_values.at(lesson.name);
  for (const LessonInput& in : lesson.inputs) {
    auto* spin = new LessonSpinBox(in, m_inputs);
    spin->setValue(v.at(in.key));
    const std::string key = in.key, name = lesson.name;
    connect(spin, &QDoubleSpinBox::valueChanged, this, [this, key, name](double value) {
      m_values[name][key] = value;
      recompute();
    });
    m_form->addRow(QString::fromStdString(in.label), spin);
    m_spins[in.key] = spin;
  }
}

LessonSpinBox* LessonsView::input(const QString& key) const {
  const auto it = m_spins.find(key.toStdString());
  return it == m_spins.end() ? nullptr : it->second;
}

std::map<std::string, LessonValues> LessonsView::values() const {
  std::map<std::string, LessonValues> out;
  for (const Lesson& l : lesson_registry()) {
    const auto it = m_values.find(l.name);
    out[l.name] = it == m_values.end() ? l.defaults() : it->second;
  }
  return out;
}

void LessonsView::recompute() {
  const Lesson& lesson = find_lesson(m_current.toStdString());
  QApplication::setOverrideCursor(Qt::WaitCursor);
  try {
    show_result(run_lesson(lesson, m_values.at(lesson.name)));
    m_error_text.clear();
    m_error->hide();
  } catch (const std::exception& e) {  // Error: an input that does not fit another (outlier row >= rows)
    m_error_text = QString::fromLocal8Bit(e.what());
    m_error->setText(m_error_text);
    m_error->show();
  }
  QApplication::restoreOverrideCursor();
  emit recomputed();
}

void LessonsView::show_result(const LessonResult& r) {
  m_table->setRowCount(static_cast<int>(r.figures.size()));
  for (int i = 0; i < static_cast<int>(r.figures.size()); ++i) {
    const LessonFigure& f = r.figures[static_cast<size_t>(i)];
    auto* label = new QTableWidgetItem(QString::fromStdString(f.label));
    label->setToolTip(QString::fromStdString(f.key));
    label->setData(Qt::UserRole, QString::fromStdString(f.key));
    auto* value = new QTableWidgetItem(format_lesson_number(f.value));
    value->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    m_table->setItem(i, 0, label);
    m_table->setItem(i, 1, value);
  }
  m_table->resizeColumnToContents(1);
  draw_plot(r.plot);
}

QString LessonsView::figure_text(const QString& key) const {
  for (int i = 0; i < m_table->rowCount(); ++i)
    if (m_table->item(i, 0)->data(Qt::UserRole).toString() == key) return m_table->item(i, 1)->text();
  return {};
}

void LessonsView::draw_plot(const LessonPlot& p) {
  m_plot->clearGraphs();
  static_cast<QCPTextElement*>(m_plot->plotLayout()->element(0, 0))->setText(QString::fromStdString(p.title));
  m_plot->xAxis->setLabel(QString::fromStdString(p.x_label));
  m_plot->yAxis->setLabel(QString::fromStdString(p.y_label));
  auto scale = [](QCPAxis* a, bool log) {
    a->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (log)
      a->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    else
      a->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  };
  scale(m_plot->xAxis, p.log_x);
  scale(m_plot->yAxis, p.log_y);
  for (size_t si = 0; si < p.series.size(); ++si) {
    const LessonSeries& s = p.series[si];
    QVector<double> xs, ys;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const double x = s.x[i], y = s.y[i];
      if (!std::isfinite(x) || !std::isfinite(y) || (p.log_x && x <= 0) || (p.log_y && y <= 0)) continue;
      xs << x;
      ys << y;
    }
    QCPGraph* g = m_plot->addGraph();
    g->setName(QString::fromStdString(s.name));
    const QColor c = run_color(static_cast<int>(si));
    g->setProperty("reference", s.reference);
    if (s.reference) {
      g->setPen(QPen(palette().color(QPalette::Text), 1.2, Qt::DashLine));
    } else {
      g->setPen(QPen(c, 1.6));
      if (xs.size() <= 64) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, c, c, 5));
    }
    g->setData(xs, ys, true);
  }
  m_plot->rescaleAxes();
  m_plot->yAxis->scaleRange(1.1);  // a curve along the top or bottom stays clear of the frame
  m_plot->replot();
}

void LessonsView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange && m_plot) {
    style_plot(m_plot, palette());
    for (int i = 0; i < m_plot->graphCount(); ++i)
      if (m_plot->graph(i)->property("reference").toBool())
        m_plot->graph(i)->setPen(QPen(palette().color(QPalette::Text), 1.2, Qt::DashLine));
    m_plot->replot();
  }
  QWidget::changeEvent(e);
}

}  // namespace trainlab::app
