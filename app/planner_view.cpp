#include "planner_view.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThread>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "pipeline_chart.h"
#include "plot_style.h"
#include "run_series.h"
#include "train/plan_check.h"
#include "train/precision.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

const MemCategory kStack[] = {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer,
                              MemCategory::Activations, MemCategory::Communication};

QSpinBox* spin(int lo, int hi, int value) {
  auto* s = new QSpinBox;
  s->setRange(lo, hi);
  s->setValue(value);
  s->setKeyboardTracking(false);
  return s;
}

QDoubleSpinBox* dspin(double lo, double hi, double value, int decimals, double step) {
  auto* s = new QDoubleSpinBox;
  s->setRange(lo, hi);
  s->setDecimals(decimals);
  s->setSingleStep(step);
  s->setValue(value);
  s->setKeyboardTracking(false);
  return s;
}

QComboBox* combo(const QStringList& items) {
  auto* c = new QComboBox;
  c->addItems(items);
  return c;
}

// A slider over powers of two (0 .. max_log2) tied to an integer spin box.
QSlider* log2_slider(QSpinBox* box, int max_log2) {
  auto* s = new QSlider(Qt::Horizontal);
  s->setRange(0, max_log2);
  s->setValue(static_cast<int>(std::lround(std::log2(std::max(1, box->value())))));
  QObject::connect(s, &QSlider::valueChanged, box, [box](int v) {
    if (static_cast<int>(std::lround(std::log2(std::max(1, box->value())))) != v) box->setValue(1 << v);
  });
  QObject::connect(box, qOverload<int>(&QSpinBox::valueChanged), s, [s](int v) {
    QSignalBlocker b(s);
    s->setValue(static_cast<int>(std::lround(std::log2(std::max(1, v)))));
  });
  return s;
}

QString gb_text(double bytes) { return QString::number(bytes / 1e9, 'f', 3) + " GB (" + format_bytes(bytes) + ")"; }

}  // namespace

PlannerView::PlannerView(QWidget* parent) : QWidget(parent) {
  setWindowTitle("Memory and scale planner");
  m_loading = true;  // no plan until every field exists
  auto* split = new QSplitter(Qt::Horizontal, this);
  auto* scroll = new QScrollArea(split);
  scroll->setWidget(build_fields());
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(330);
  split->addWidget(scroll);
  split->addWidget(build_results());
  split->setStretchFactor(1, 1);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(split);
  on_model_changed();
  on_gpu_changed();
  m_loading = false;
  recompute();
}

PlannerView::~PlannerView() {
  if (m_thread) {  // a check's run finishes its step; its result is dropped
    m_thread->wait();
    delete m_thread;
  }
}

void PlannerView::add_field(const QString& option, QWidget* editor, const QString& label, const QString& tip,
                            QWidget* slider) {
  m_fields[option] = editor;
  editor->setObjectName(option);
  editor->setToolTip(option + ": " + tip);
  QFormLayout* form = m_form;
  if (!slider) {
    form->addRow(label, editor);
  } else {
    auto* row = new QWidget;
    auto* h = new QHBoxLayout(row);
    h->setContentsMargins(0, 0, 0, 0);
    h->addWidget(editor);
    h->addWidget(slider, 1);
    slider->setToolTip(editor->toolTip());
    form->addRow(label, row);
  }
  auto changed = [this] {
    if (!m_loading) recompute();
  };
  if (auto* s = qobject_cast<QSpinBox*>(editor)) connect(s, qOverload<int>(&QSpinBox::valueChanged), this, changed);
  if (auto* d = qobject_cast<QDoubleSpinBox*>(editor)) connect(d, qOverload<double>(&QDoubleSpinBox::valueChanged), this, changed);
  if (auto* c = qobject_cast<QComboBox*>(editor)) connect(c, &QComboBox::currentTextChanged, this, changed);
}

QWidget* PlannerView::build_fields() {
  auto* w = new QWidget;
  m_form = new QFormLayout(w);
  QStringList models;
  for (const auto& n : plan_model_presets()) models << QString::fromStdString(n);
  models << "transformer" << "params";
  add_field("--model", combo(models), "Model", "a lab model, a transformer by its shape, or a parameter count");
  add_field("--params", dspin(1, 1e15, 1e9, 0, 1e8), "Parameters", "a model by its parameter count alone");
  add_field("--layers", spin(1, 1 << 20, 12), "Layers L", "transformer layers");
  add_field("--hidden", spin(1, 1 << 24, 768), "Hidden h", "width of the residual stream; the MLP is 4h wide");
  add_field("--heads", spin(1, 1 << 24, 12), "Heads a", "attention heads (divide h)");
  add_field("--seq", spin(1, 1 << 24, 1024), "Sequence s", "tokens per sample");
  add_field("--vocab", spin(2, 1 << 24, 65), "Vocabulary V", "tokens in the vocabulary");
  add_field("--dropout", dspin(0, 0.99, 0, 2, 0.05), "Dropout", "probability; 0 for none");
  auto* batch = spin(1, 1 << 20, 8);
  add_field("--batch", batch, "Micro-batch b", "samples per micro-batch per GPU", log2_slider(batch, 12));
  add_field("--precision", combo({}), "Precision", "fp32, tf32, bf16, fp16 or fp8 (16-bit: an fp32 master copy)");
  for (const PrecisionPolicy& p : precision_policies())
    qobject_cast<QComboBox*>(m_fields["--precision"])->addItem(QString::fromStdString(p.name));
  qobject_cast<QComboBox*>(m_fields["--precision"])->setCurrentText("bf16");
  add_field("--optimizer", combo({"adamw", "sgd", "adamw8bit", "adafactor", "lion"}), "Optimizer",
            "state a parameter: adamw 8, sgd 4, adamw8bit ~2 (8-bit codes + block scales), adafactor ~4(r+c)/(r c) "
            "on matrices, lion 4");
  add_field("--offload", combo({"none", "cpu"}), "Offload",
            "cpu: fp32 masters and optimizer state in host memory, off the GPU's bars (ZeRO 0 only)");
  add_field("--recompute", combo({"none", "selective", "full"}), "Recompute", "activation recomputation");
  add_field("--recompute-every", spin(1, 1 << 20, 1), "Recompute every", "full: layers per checkpointed group");
  add_field("--activations", combo({"lab", "megatron"}), "Activations count",
            "lab: TrainLab's own buffers; megatron: Korthikanti et al. 2022");
  auto* gpus = spin(1, 1 << 20, 8);
  add_field("--gpus", gpus, "GPUs", "G = DP x TP x PP", log2_slider(gpus, 14));
  add_field("--nodes", spin(1, 1 << 20, 1), "Nodes", "the GPUs spread evenly over these");
  add_field("--zero", combo({"0", "1", "2", "3"}), "ZeRO stage", "shards over the data-parallel ranks");
  add_field("--tp", spin(1, 1 << 20, 1), "Tensor parallel T", "divides the heads");
  add_field("--pp", spin(1, 1 << 20, 1), "Pipeline stages P", "divides the layers");
  add_field("--schedule", combo({"1f1b", "gpipe", "interleaved", "zb-h1"}), "Pipeline schedule",
            "P > 1: the order each stage runs its micro-batches' forwards and backwards (drawn below)");
  add_field("--virtual-stages", spin(1, 1 << 10, 1), "Virtual stages V", "interleaved: model chunks a GPU");
  add_field("--sequence-parallel", combo({"off", "on"}), "Sequence parallel",
            "TP > 1: LayerNorm, dropout and the residual stream on s/T tokens per GPU");
  auto* mb = spin(1, 1 << 20, 1);
  add_field("--micro-batches", mb, "Micro-batches M", "per optimizer step", log2_slider(mb, 12));
  QStringList gpu_names;
  for (const GpuSpec& g : gpu_specs()) gpu_names << QString::fromStdString(g.name);
  add_field("--gpu", combo(gpu_names), "GPU", "memory, peak FLOP/s and links");
  qobject_cast<QComboBox*>(m_fields["--gpu"])->setCurrentText("h200");
  add_field("--gpu-memory", dspin(0.1, 1e6, 141, 1, 1), "GPU memory (GB)", "10^9 bytes");
  auto* mfu = dspin(0.01, 1.0, 0.4, 2, 0.01);
  auto* mfu_slider = new QSlider(Qt::Horizontal);
  mfu_slider->setRange(1, 100);
  mfu_slider->setValue(40);
  connect(mfu_slider, &QSlider::valueChanged, mfu, [mfu](int v) { mfu->setValue(v / 100.0); });
  connect(mfu, qOverload<double>(&QDoubleSpinBox::valueChanged), mfu_slider, [mfu_slider](double v) {
    QSignalBlocker b(mfu_slider);
    mfu_slider->setValue(static_cast<int>(std::lround(v * 100)));
  });
  add_field("--mfu", mfu, "MFU", "measured model FLOPs utilisation", mfu_slider);
  add_field("--nvlink-gbs", dspin(0.1, 1e6, 450, 1, 10), "NVLink (GB/s)", "within a node, per GPU and direction");
  add_field("--network-gbs", dspin(0.1, 1e6, 50, 1, 5), "Network (GB/s)", "between nodes, per GPU");
  connect(qobject_cast<QComboBox*>(m_fields["--model"]), &QComboBox::currentTextChanged, this, [this] {
    if (m_loading) return;
    m_loading = true;
    on_model_changed();
    m_loading = false;
    recompute();
  });
  connect(qobject_cast<QComboBox*>(m_fields["--gpu"]), &QComboBox::currentTextChanged, this, [this] {
    if (m_loading) return;
    m_loading = true;
    on_gpu_changed();
    m_loading = false;
    recompute();
  });
  return w;
}

QWidget* PlannerView::build_results() {
  auto* w = new QWidget;
  auto* v = new QVBoxLayout(w);
  m_summary = new QLabel(w);
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  v->addWidget(m_summary);
  auto* plots = new QHBoxLayout;
  m_memory = new QCustomPlot(w);
  m_memory->setMinimumSize(380, 300);
  m_memory->yAxis->setLabel("GB per GPU");
  m_memory->xAxis->setLabel("pipeline stage");
  m_memory->legend->setVisible(true);
  m_memory->legend->setFont(QFont(font().family(), 8));
  m_time = new QCustomPlot(w);
  m_time->setMinimumSize(380, 300);
  m_time->xAxis->setLabel("seconds per step");
  m_time->legend->setVisible(true);
  m_time->legend->setFont(QFont(font().family(), 8));
  plots->addWidget(m_memory, 1);
  plots->addWidget(m_time, 1);
  v->addLayout(plots, 3);
  m_pipeline = new PipelineChart(w);
  v->addWidget(m_pipeline, 2);
  auto* buttons = new QHBoxLayout;
  auto* search = new QPushButton("Search layouts", w);
  search->setObjectName("planner_search");
  search->setToolTip("The layouts (DP x TP x PP, ZeRO, recomputation, micro-batches) that fit, fastest first, at the "
                     "same global batch");
  connect(search, &QPushButton::clicked, this, &PlannerView::run_search);
  m_check = new QPushButton("Check on this machine", w);
  m_check->setObjectName("planner_check");
  connect(m_check, &QPushButton::clicked, this, [this] { start_check(); });
  buttons->addWidget(search);
  buttons->addWidget(m_check);
  buttons->addStretch(1);
  v->addLayout(buttons);
  m_check_note = new QLabel(w);
  m_check_note->setWordWrap(true);
  v->addWidget(m_check_note);
  m_search_table = new QTableWidget(w);
  m_search_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_search_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_search_table->verticalHeader()->setVisible(false);
  connect(m_search_table, &QTableWidget::cellClicked, this, [this](int row, int) { apply_search_row(row); });
  m_check_table = new QTableWidget(w);
  m_check_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_check_table->verticalHeader()->setVisible(false);
  // Empty, the tables say what fills them (two blank boxes said nothing).
  for (const auto& [t, hint] : {std::pair{m_search_table, "Search layouts: each layout that fits, fastest first (a click applies it)"},
                                std::pair{m_check_table, "Check on this machine: measured against predicted"}}) {
    t->setColumnCount(1);
    t->setHorizontalHeaderLabels({hint});
    t->horizontalHeader()->setStretchLastSection(true);
  }
  auto* tables = new QHBoxLayout;
  tables->addWidget(m_search_table, 3);
  tables->addWidget(m_check_table, 2);
  v->addLayout(tables, 2);
  style_plot(m_memory, palette());
  style_plot(m_time, palette());
  return w;
}

QWidget* PlannerView::field(const QString& option) const { return m_fields.value(option, nullptr); }

void PlannerView::set_field(const QString& option, const QVariant& value) {
  QWidget* w = field(option);
  if (!w) throw Error("planner: no field " + option.toStdString());
  if (auto* c = qobject_cast<QComboBox*>(w))
    c->setCurrentText(value.toString());
  else if (auto* s = qobject_cast<QSpinBox*>(w))
    s->setValue(value.toInt());
  else if (auto* d = qobject_cast<QDoubleSpinBox*>(w))
    d->setValue(value.toDouble());
}

double PlannerView::number(const QString& option) const {
  QWidget* w = field(option);
  if (auto* s = qobject_cast<QSpinBox*>(w)) return s->value();
  if (auto* d = qobject_cast<QDoubleSpinBox*>(w)) return d->value();
  if (auto* c = qobject_cast<QComboBox*>(w)) return c->currentText().toDouble();
  throw Error("planner: no field " + option.toStdString());
}

QString PlannerView::text(const QString& option) const {
  if (auto* c = qobject_cast<QComboBox*>(field(option))) return c->currentText();
  return QString::number(number(option));
}

void PlannerView::on_model_changed() {
  const std::string name = text("--model").toStdString();
  const bool preset = name != "transformer" && name != "params";
  PlanModel m;
  if (preset) m = plan_model_preset(name, "--model");
  const bool shape = name == "transformer" || m.kind == PlanModelKind::Transformer;
  for (const char* f : {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--dropout"}) field(f)->setEnabled(shape);
  field("--params")->setEnabled(name == "params");
  for (const char* f : {"--recompute", "--recompute-every", "--tp", "--pp", "--activations"}) field(f)->setEnabled(shape);
  if (m.kind == PlanModelKind::Transformer) {
    const CharGptConfig& c = m.transformer;
    set_field("--layers", static_cast<int>(c.layers));
    set_field("--hidden", static_cast<int>(c.dim));
    set_field("--heads", static_cast<int>(c.heads));
    set_field("--seq", static_cast<int>(c.context));
    set_field("--vocab", static_cast<int>(c.vocab));
    set_field("--dropout", c.dropout);
    set_field("--activations", "lab");
  } else if (name == "transformer") {
    set_field("--dropout", 0.1);
    set_field("--activations", "megatron");
  }
  if (!shape) {
    set_field("--recompute", "none");
    set_field("--tp", 1);
    set_field("--pp", 1);
  }
}

void PlannerView::on_gpu_changed() {
  const GpuSpec& g = gpu_spec(text("--gpu").toStdString(), "--gpu");
  set_field("--gpu-memory", g.memory_bytes / 1e9);
  set_field("--nvlink-gbs", g.nvlink_bytes_per_s / 1e9);
  set_field("--network-gbs", g.network_bytes_per_s / 1e9);
}

PlanSetup PlannerView::setup() const {
  PlanSetup s;
  const std::string name = text("--model").toStdString();
  if (name == "params") {
    s.model.kind = PlanModelKind::Params;
    s.model.name = "params";
    s.model.params = static_cast<int64_t>(number("--params"));
  } else {
    if (name != "transformer") s.model = plan_model_preset(name, "--model");
    if (s.model.kind == PlanModelKind::Transformer) {
      CharGptConfig& c = s.model.transformer;
      c.layers = static_cast<int64_t>(number("--layers"));
      c.dim = static_cast<int64_t>(number("--hidden"));
      c.heads = static_cast<int64_t>(number("--heads"));
      c.context = static_cast<int64_t>(number("--seq"));
      c.vocab = static_cast<int64_t>(number("--vocab"));
      c.dropout = number("--dropout");
    }
  }
  resolve_plan_setup(s, text("--precision").toStdString(), text("--optimizer").toStdString(), text("--gpu").toStdString());
  s.offload = text("--offload") == "cpu";
  s.micro_batch = static_cast<int64_t>(number("--batch"));
  s.gpus = static_cast<int64_t>(number("--gpus"));
  s.nodes = static_cast<int64_t>(number("--nodes"));
  s.count = s.model.kind == PlanModelKind::Transformer ? activation_count_from_name(text("--activations").toStdString(), "--activations")
                                                        : ActivationCount::Lab;
  s.gpu_memory_bytes = number("--gpu-memory") * 1e9;
  s.mfu = number("--mfu");
  s.nvlink_bytes_per_s = number("--nvlink-gbs") * 1e9;
  s.network_bytes_per_s = number("--network-gbs") * 1e9;
  return s;
}

Layout PlannerView::layout() const {
  Layout l;
  l.tp = static_cast<int64_t>(number("--tp"));
  l.pp = static_cast<int64_t>(number("--pp"));
  const int64_t gpus = static_cast<int64_t>(number("--gpus"));
  l.dp = gpus % (l.tp * l.pp) == 0 ? gpus / (l.tp * l.pp) : 1;
  l.zero = text("--zero").toInt();
  l.recompute = recompute_from_name(text("--recompute").toStdString(), "--recompute");
  l.recompute_every = static_cast<int64_t>(number("--recompute-every"));
  l.micro_batches = static_cast<int64_t>(number("--micro-batches"));
  l.schedule = dist::pipeline_schedule_from_name(text("--schedule").toStdString(), "--schedule");
  l.virtual_stages = static_cast<int64_t>(number("--virtual-stages"));
  l.sequence_parallel = text("--sequence-parallel") == "on";
  return l;
}

void PlannerView::recompute() {
  try {
    m_setup = setup();
    m_result = plan_layout(m_setup, layout());
    m_has_result = true;
    m_error.clear();
  } catch (const Error& e) {
    m_has_result = false;
    m_error = QString::fromStdString(e.what());
  }
  if (m_has_result) {
    const StepTime& t = m_result.time;
    const Layout& l = m_result.layout;
    m_summary->setText(
        QString("<b>%1</b>: %2 parameters. DP %3 &times; TP %4 &times; PP %5, ZeRO %6, recompute %7, %8 micro-batch(es). "
                "Per GPU (stage %9): <b>%10</b> of %11 &mdash; %12. Step %13 s, %14 tokens/s.%15")
            .arg(QString::fromStdString(m_setup.model.name))
            .arg(QLocale().toString(static_cast<qlonglong>(m_result.params_total)))
            .arg(l.dp).arg(l.tp).arg(l.pp).arg(l.zero)
            .arg(recompute_name(l.recompute))
            .arg(l.micro_batches)
            .arg(QString("%1 of %2").arg(m_result.stages[m_result.worst].index + 1).arg(m_result.stages.size()))
            .arg(gb_text(static_cast<double>(m_result.per_gpu_total)), gb_text(m_setup.gpu_memory_bytes),
                 m_result.fits ? QString("fits") : QString("<span style='color:#b00020'><b>does not fit</b></span>"))
            .arg(t.step_s, 0, 'g', 4)
            .arg(t.tokens_per_s(), 0, 'g', 4)
            .arg((m_result.activations_known ? QString() : QString(" Activations are not predicted from a parameter count.")) +
                 (m_setup.offload ? QString(" Offload: %1 in host memory (masters, optimizer state, staging), transfers not "
                                            "in the step time.")
                                        .arg(gb_text(static_cast<double>(m_result.per_gpu[static_cast<size_t>(MemCategory::Host)])))
                                  : QString())));
  } else {
    m_summary->setText("<span style='color:#b00020'>" + m_error.toHtmlEscaped() + "</span>");
  }
  draw_memory();
  draw_time();
  draw_pipeline();
  update_check_button();
}

void PlannerView::draw_pipeline() {
  Layout l;
  try {
    l = layout();
  } catch (const Error& e) {
    m_pipeline->show_none(QString::fromStdString(e.what()));
    return;
  }
  if (l.pp <= 1) {
    m_pipeline->show_none("One pipeline stage: no schedule to draw. Set Pipeline stages P above 1 to see how the "
                          "stages pass micro-batches along and where they wait (the bubble).");
    return;
  }
  m_pipeline->show_schedule(l.schedule, static_cast<int>(l.pp), static_cast<int>(l.micro_batches),
                            static_cast<int>(l.virtual_stages));
}

void PlannerView::draw_memory() {
  QCustomPlot* p = m_memory;
  p->clearPlottables();
  p->clearItems();
  if (!m_has_result) {
    p->replot();
    return;
  }
  QCPBars* below = nullptr;
  double top = 0;
  QVector<double> keys;
  for (const StagePlan& st : m_result.stages) keys << static_cast<double>(st.index + 1);  // stages from 1, as the CLI
  for (MemCategory c : kStack) {
    auto* bars = new QCPBars(p->xAxis, p->yAxis);
    bars->setName(mem_category_name(c));
    bars->setWidth(0.6);
    const QColor col = category_color(static_cast<size_t>(c));
    bars->setBrush(col);
    bars->setPen(QPen(col.darker(130)));
    QVector<double> vals;
    for (const StagePlan& st : m_result.stages) vals << static_cast<double>(st.bytes[static_cast<size_t>(c)]) / 1e9;
    bars->setData(keys, vals, true);
    if (below) bars->moveAbove(below);
    below = bars;
  }
  for (const StagePlan& st : m_result.stages) top = std::max(top, static_cast<double>(st.total()) / 1e9);
  const double mem = m_setup.gpu_memory_bytes / 1e9;
  auto* line = new QCPItemStraightLine(p);
  line->setObjectName("gpu_memory");
  line->point1->setCoords(0, mem);
  line->point2->setCoords(1, mem);
  line->setPen(QPen(palette().color(QPalette::Text), 1.5, Qt::DashLine));
  auto* label = new QCPItemText(p);
  label->position->setCoords(0.55, mem);
  label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
  label->setText(QString("GPU memory %1 GB").arg(mem, 0, 'g', 4));
  label->setColor(palette().color(QPalette::Text));
  p->xAxis->setRange(0.4, static_cast<double>(m_result.stages.size()) + 0.6);
  p->yAxis->setRange(0, std::max(top, mem) * 1.12);
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  p->xAxis->setTicker(ticker);
  p->replot();
}

void PlannerView::draw_time() {
  QCustomPlot* p = m_time;
  p->clearPlottables();
  if (!m_has_result) {
    p->replot();
    return;
  }
  const StepTime& t = m_result.time;
  const struct {
    const char* name;
    double s;
  } parts[] = {{"compute", t.compute_s}, {"TP communication", t.tp_s}, {"PP communication", t.pp_s},
               {"DP communication", t.dp_s}, {"pipeline bubble", t.bubble_s}};
  QCPBars* below = nullptr;
  int i = 0;
  for (const auto& part : parts) {
    auto* bars = new QCPBars(p->yAxis, p->xAxis);  // horizontal: keys on the y axis
    bars->setName(QString("%1 %2 s").arg(part.name).arg(part.s, 0, 'g', 3));
    const QColor col = run_color(i++);
    bars->setBrush(col);
    bars->setPen(QPen(col.darker(130)));
    bars->setWidth(0.4);
    bars->setData(QVector<double>{1.0}, QVector<double>{part.s}, true);
    if (below) bars->moveAbove(below);
    below = bars;
  }
  p->yAxis->setRange(0.6, 2.0);  // the bar low, the legend above it
  p->yAxis->setTickLabels(false);
  p->xAxis->setRange(0, std::max(1e-9, t.step_s) * 1.05);
  p->plotLayout()->setRowSpacing(0);
  p->replot();
}

void PlannerView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange && m_memory) {
    style_plot(m_memory, palette());
    style_plot(m_time, palette());
    draw_memory();
    draw_time();
  }
  QWidget::changeEvent(e);
}

}  // namespace trainlab::app
