#include "config_form.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QStandardItemModel>
#include <QRegularExpressionValidator>
#include <QScrollArea>
#include <QTimer>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>
#include <qcustomplot.h>
#include <climits>
#include <cmath>

#include "backend/backend.h"
#include "config/run_defaults.h"
#include "data/dataset.h"
#include "nn/transformer.h"
#include "plot_style.h"
#include "run_series.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

// A double spin box that shows values as %g (1e-08, 0.001, 65536) and steps in proportion to the
// value, so that learning rates and epsilons are editable with the arrows.
class SciSpinBox : public QDoubleSpinBox {
 public:
  explicit SciSpinBox(QWidget* parent = nullptr) : QDoubleSpinBox(parent) {
    setDecimals(323);
    setKeyboardTracking(false);
  }
  QString textFromValue(double v) const override { return QString::number(v, 'g', 8); }
  double valueFromText(const QString& text) const override { return QLocale::c().toDouble(text.trimmed()); }
  QValidator::State validate(QString& text, int&) const override {
    bool ok = false;
    const double v = QLocale::c().toDouble(text.trimmed(), &ok);
    if (!ok) return QValidator::Intermediate;
    return (v >= minimum() && v <= maximum()) ? QValidator::Acceptable : QValidator::Intermediate;
  }
  void stepBy(int steps) override {
    double v = value();
    const double mag = v == 0 ? 0.1 : std::pow(10.0, std::floor(std::log10(std::fabs(v))));
    double step = mag / 10.0;
    if (std::fabs(v) < 1e-300) step = 0.1;
    // Going below the current decade steps in the smaller decade.
    if (steps < 0 && std::fabs(v - mag) < mag * 1e-9) step /= 10.0;
    setValue(std::clamp(v + steps * step, minimum(), maximum()));
  }
};

// A char-gpt dimension whose 0 means "from model.preset": 0 shows the preset's value, and the arrows
// step from that value rather than from 0.
class PresetSpinBox : public QSpinBox {
 public:
  using QSpinBox::QSpinBox;
  void set_preset_value(int v) {
    m_preset = v;
    setSpecialValueText(QString("%1 (preset)").arg(v));
  }
  void stepBy(int steps) override {
    if (value() == minimum() && m_preset > 0)
      setValue(m_preset + steps);
    else
      QSpinBox::stepBy(steps);
  }

 private:
  int m_preset = 0;
};

bool is_preset_dimension(const std::string& key) {
  return key == "model.layers" || key == "model.heads" || key == "model.dim" || key == "model.context";
}

QString section_title(const QString& s) {
  static const QHash<QString, QString> names = {
      {"model", "Model"},        {"data", "Data set"},    {"train", "Training"},    {"optim", "Optimizer"},
      {"schedule", "Learning-rate schedule"}, {"precision", "Precision"}, {"device", "Device"},
      {"run", "Run record"},     {"checkpoint", "Activation checkpointing"}, {"prune", "Pruning"},
      {"quant", "Quantization"}, {"distill", "Distillation"}, {"dist", "Parallelism (ranks, GPUs)"},
      {"finetune", "Fine-tune (init run, method, rank, alpha, targets)"}};
  if (names.contains(s)) return names[s];
  QString t = s;
  t.replace('_', ' ');
  if (!t.isEmpty()) t[0] = t[0].toUpper();
  return t;
}

// The section a key's row is in: its prefix, except compress.init_from (the trained run a run
// starts from), which heads the Fine-tune section.
QString section_of(const std::string& key) {
  if (key == "compress.init_from") return "finetune";
  return QString::fromStdString(key.substr(0, key.find('.')));
}

QString pretty_leaf(const std::string& key) {
  if (key == "compress.init_from") return "Init run";
  QString k = QString::fromStdString(key);
  k = k.mid(k.indexOf('.') + 1);
  k.replace('.', ' ').replace('_', ' ');
  if (!k.isEmpty()) k[0] = k[0].toUpper();
  return k;
}

QString tooltip_for(const ConfigKey& k) {
  QString t = "<p><b>" + QString::fromStdString(k.key) + "</b></p><p>" + QString::fromStdString(k.help).toHtmlEscaped() +
              "</p><p><i>Expects " + QString::fromStdString(describe_expected(k)).toHtmlEscaped() + "; default " +
              json_value_text(k.default_value).toHtmlEscaped() + ".</i></p>";
  if (k.mid_run) t += "<p><b>Live:</b> can change while a run trains; applies at the next step and leaves a marker on the plots.</p>";
  return t;
}

// Which section order the panel uses: the common ones first, then whatever the schema adds.
int section_rank(const QString& s) {
  static const QStringList order = {"model", "data", "device", "precision", "train", "optim", "schedule"};
  const int i = order.indexOf(s);
  return i < 0 ? (s == "run" ? 1000 : 100) : i;
}

}  // namespace

ConfigForm::ConfigForm(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  outer->setSpacing(6);
  m_filter = new QLineEdit(this);
  m_filter->setPlaceholderText("Filter options (name or help text)");
  m_filter->setClearButtonEnabled(true);
  m_filter->setToolTip("Show only the options whose key or explanation contains this text.");
  outer->addWidget(m_filter);
  connect(m_filter, &QLineEdit::textChanged, this, &ConfigForm::apply_filter);

  QStringList sections;
  for (const auto& k : config_schema()) {
    const QString sec = section_of(k.key);
    if (!sections.contains(sec)) sections << sec;
  }
  std::stable_sort(sections.begin(), sections.end(),
                   [](const QString& a, const QString& b) { return section_rank(a) < section_rank(b); });

  for (const QString& sec : sections) {
    auto* box = new QGroupBox(section_title(sec), this);
    box->setObjectName("section_" + sec);
    auto* form = new QFormLayout(box);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->setRowWrapPolicy(QFormLayout::DontWrapRows);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    form->setContentsMargins(8, 6, 8, 6);
    form->setVerticalSpacing(4);
    for (const auto& k : config_schema()) {
      if (section_of(k.key) != sec) continue;
      Row r;
      r.key = &k;
      r.editor = make_editor(k);
      r.editor->setObjectName(QString::fromStdString(k.key));
      r.field = r.editor;
      if (k.key == "data.path") {
        auto* w = new QWidget(box);
        auto* h = new QHBoxLayout(w);
        h->setContentsMargins(0, 0, 0, 0);
        h->addWidget(r.editor, 1);
        auto* b = new QToolButton(w);
        b->setText("...");
        b->setToolTip("Choose a digits CSV file, a text file (char-gpt) or a folder of IDX files (MNIST format, "
                      "e.g. Fashion-MNIST)");
        b->setPopupMode(QToolButton::InstantPopup);
        auto* menu = new QMenu(b);
        auto* le = static_cast<QLineEdit*>(r.editor);
        menu->addAction("Data file (CSV or text)...", this, [this, le] {
          const QString f = QFileDialog::getOpenFileName(this, "Data file", le->text(),
                                                         "Data (*.csv *.csv.gz *.gz *.txt);;All files (*)");
          if (f.isEmpty()) return;
          le->setText(f);
          on_user_edit("data.path");
        });
        menu->addAction("Folder of IDX files (Fashion-MNIST, MNIST)...", this, [this, le] {
          const QString d = QFileDialog::getExistingDirectory(this, "Folder of IDX files", le->text());
          if (!d.isEmpty()) use_idx_folder(d);
        });
        b->setMenu(menu);
        h->addWidget(b);
        r.field = w;
      }
      if (k.key == "compress.init_from") r.field = init_run_field(box, static_cast<QLineEdit*>(r.editor));
      QString label = pretty_leaf(k.key);
      r.label = new QLabel(label, box);
      r.label->setTextFormat(Qt::RichText);
      if (k.mid_run) r.label->setText(label + " <span style='color:#2a9d8f;font-weight:600'>&#9679;</span>");
      r.label_html = r.label->text();
      const QString tip = tooltip_for(k);
      r.label->setToolTip(tip);
      r.editor->setToolTip(tip);
      r.label->setBuddy(r.editor);
      r.form = form;
      r.group = box;
      form->addRow(r.label, r.field);
      m_rows[k.key] = r;
      m_order.push_back(k.key);
    }
    outer->addWidget(box);
  }
  if (m_rows.contains("prune.method")) {
    Row& r = m_rows["prune.method"];
    m_sparsity = new QCustomPlot(r.group);
    m_sparsity->setObjectName("sparsity_preview");
    m_sparsity->setMinimumHeight(110);
    m_sparsity->setMaximumHeight(130);
    m_sparsity->addGraph();
    m_sparsity->graph(0)->setPen(QPen(QColor(44, 160, 44), 1.6));
    m_sparsity->graph(0)->setBrush(QColor(44, 160, 44, 50));
    QFont f = font();
    f.setPointSizeF(std::max(7.0, f.pointSizeF() - 1.5));
    for (QCPAxis* ax : {m_sparsity->xAxis, m_sparsity->yAxis}) {
      ax->setTickLabelFont(f);
      ax->setLabelFont(f);
    }
    style_plot(m_sparsity, palette());
    m_sparsity->yAxis->setLabel("sparsity %");
    m_sparsity->xAxis->setLabel("step");
    m_sparsity->axisRect()->setAutoMargins(QCP::msLeft | QCP::msBottom);
    m_sparsity->axisRect()->setMargins(QMargins(0, 6, 10, 0));
    m_sparsity->setToolTip("Preview of the pruning schedule: the fraction of pruned weights set to zero at each step.");
    r.form->addRow("Sparsity preview", m_sparsity);
  }
  auto* legend = new QLabel("<span style='color:#2a9d8f'>&#9679;</span> live: can change while a run trains", this);
  legend->setTextFormat(Qt::RichText);
  legend->setEnabled(false);
  outer->addWidget(legend);
  outer->addStretch(1);
  set_config(Config());
}

// compress.init_from's line edit with a "..." button: a run folder (its model.safetensors) or a
// weights file.
QWidget* ConfigForm::init_run_field(QWidget* parent, QLineEdit* le) {
  auto* w = new QWidget(parent);
  auto* h = new QHBoxLayout(w);
  h->setContentsMargins(0, 0, 0, 0);
  h->addWidget(le, 1);
  auto* b = new QToolButton(w);
  b->setText("...");
  b->setToolTip("Choose the trained run to start from (its folder) or a weights file");
  b->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(b);
  menu->addAction("Run folder...", this, [this, le] {
    const QString d = QFileDialog::getExistingDirectory(this, "Trained run to start from", le->text());
    if (d.isEmpty()) return;
    le->setText(d);
    on_user_edit("compress.init_from");
  });
  menu->addAction("Weights file...", this, [this, le] {
    const QString f = QFileDialog::getOpenFileName(this, "Weights to start from", le->text(),
                                                   "Weights (*.safetensors);;All files (*)");
    if (f.isEmpty()) return;
    le->setText(f);
    on_user_edit("compress.init_from");
  });
  b->setMenu(menu);
  h->addWidget(b);
  return w;
}

QWidget* ConfigForm::make_editor(const ConfigKey& k) {
  const std::string key = k.key;
  auto edited = [this, key] { on_user_edit(key); };
  if (key == "device.name") {
    auto* c = new QComboBox(this);
    c->setEditable(true);
    c->addItem("auto");
    for (const auto& d : available_devices()) c->addItem(QString::fromStdString(d));
    connect(c, &QComboBox::currentTextChanged, this, edited);
    return c;
  }
  switch (k.type) {
    case KeyType::Int: {
      auto* s = is_preset_dimension(key) ? new PresetSpinBox(this) : new QSpinBox(this);
      s->setRange(static_cast<int>(std::max<double>(k.min, INT_MIN)), static_cast<int>(std::min<double>(k.max, INT_MAX)));
      s->setKeyboardTracking(false);
      s->setAccelerated(true);
      if (key == "train.steps" || key == "train.eval_every") s->setSpecialValueText("auto (0)");
      connect(s, &QSpinBox::valueChanged, this, edited);
      return s;
    }
    case KeyType::Float: {
      auto* s = new SciSpinBox(this);
      s->setRange(k.min, k.max);
      connect(s, &QDoubleSpinBox::valueChanged, this, edited);
      return s;
    }
    case KeyType::Bool: {
      auto* c = new QCheckBox(this);
      connect(c, &QCheckBox::toggled, this, edited);
      return c;
    }
    case KeyType::Enum: {
      auto* c = new QComboBox(this);
      for (const auto& ch : k.choices) c->addItem(QString::fromStdString(ch));
      if (key == "data.name") mark_fashion_mnist(c);
      connect(c, &QComboBox::currentTextChanged, this, edited);
      return c;
    }
    case KeyType::IntList: {
      auto* e = new QLineEdit(this);
      e->setValidator(new QRegularExpressionValidator(QRegularExpression(R"(\s*\d+(\s*,\s*\d+)*\s*,?\s*)"), e));
      e->setPlaceholderText("e.g. 256, 256");
      connect(e, &QLineEdit::editingFinished, this, edited);
      return e;
    }
    case KeyType::String:
    default: {
      auto* e = new QLineEdit(this);
      if (key == "data.path") e->setPlaceholderText("shipped data set");
      if (key == "run.out") e->setPlaceholderText("automatic (runs folder/date-model-precision)");
      if (key == "run.name") e->setPlaceholderText("optional label");
      connect(e, &QLineEdit::editingFinished, this, edited);
      return e;
    }
  }
}

Json ConfigForm::read(const Row& r) const {
  const ConfigKey& k = *r.key;
  QWidget* w = r.editor;
  if (auto* c = qobject_cast<QComboBox*>(w)) return c->currentText().trimmed().toStdString();
  if (auto* s = qobject_cast<QSpinBox*>(w)) return static_cast<int64_t>(s->value());
  if (auto* s = qobject_cast<QDoubleSpinBox*>(w)) return s->value();
  if (auto* c = qobject_cast<QCheckBox*>(w)) return c->isChecked();
  if (auto* e = qobject_cast<QLineEdit*>(w)) {
    if (k.type == KeyType::IntList) {
      Json a = Json::array();
      for (const QString& p : e->text().split(',', Qt::SkipEmptyParts)) {
        bool ok = false;
        const qlonglong v = p.trimmed().toLongLong(&ok);
        if (ok) a.push_back(static_cast<int64_t>(v));
      }
      return a;
    }
    return e->text().toStdString();
  }
  return k.default_value;
}

void ConfigForm::write(Row& r, const Json& v) {
  QWidget* w = r.editor;
  if (auto* c = qobject_cast<QComboBox*>(w)) {
    const QString t = json_value_text(v);
    const int i = c->findText(t);
    if (i >= 0)
      c->setCurrentIndex(i);
    else if (c->isEditable())
      c->setCurrentText(t);
  } else if (auto* s = qobject_cast<QSpinBox*>(w)) {
    s->setValue(static_cast<int>(std::clamp<double>(v.get<double>(), s->minimum(), s->maximum())));
  } else if (auto* s = qobject_cast<QDoubleSpinBox*>(w)) {
    s->setValue(v.get<double>());
  } else if (auto* c = qobject_cast<QCheckBox*>(w)) {
    c->setChecked(v.get<bool>());
  } else if (auto* e = qobject_cast<QLineEdit*>(w)) {
    e->setText(r.key->type == KeyType::IntList ? json_value_text(v).replace(",", ", ") : json_value_text(v));
  }
}

void ConfigForm::set_config(const Config& c) {
  m_loading = true;
  for (auto& key : m_order) write(m_rows[key], c.at(key));
  // char-gpt reads the default data set (digits) as tinyshakespeare: show what it trains on.
  if (m_rows.contains("data.name")) write(m_rows["data.name"], resolved_config(c).at("data.name"));
  m_loading = false;
  for (const std::string& key : std::set<std::string>(m_user_keys)) mark_user_key(key, false);
  update_dependencies();
  remember_config();
}

Config ConfigForm::config() const {
  Config c;
  for (const auto& key : m_order) {
    const Row& r = m_rows[key];
    c.set_json(key, read(r), "the '" + pretty_leaf(key).toStdString() + "' control (" + r.group->title().toStdString() + ")");
  }
  return c;
}

Json ConfigForm::value(const std::string& key) const {
  auto it = m_rows.find(key);
  return it == m_rows.end() ? Json() : read(*it);
}

void ConfigForm::set_value(const std::string& key, const Json& v) {
  auto it = m_rows.find(key);
  if (it == m_rows.end()) return;
  write(*it, v);
  // Line edits report edits on editingFinished, which a programmatic change does not send.
  if (qobject_cast<QLineEdit*>(it->editor)) on_user_edit(key);
}

QWidget* ConfigForm::editor(const std::string& key) const {
  auto it = m_rows.find(key);
  return it == m_rows.end() ? nullptr : it->editor;
}

QStringList ConfigForm::keys() const {
  QStringList l;
  for (const auto& k : m_order) l << QString::fromStdString(k);
  return l;
}

void ConfigForm::on_user_edit(const std::string& key) {
  if (m_loading) return;
  mark_user_key(key, true);
  // Another model, preset or optimizer: its defaults in the fields the user has not set.
  if (key == "model.name" || key == "model.preset" || key == "optim.name") apply_switch_defaults_from(m_last);
  remember_config();
  update_dependencies();
  emit edited();
  const Row& r = m_rows[key];
  if (m_running && r.key->mid_run) {
    try {
      const Json v = validate_config_value(*r.key, read(r), "live change");
      emit live_changed(QString::fromStdString(key), QString::fromStdString(v.dump()));
    } catch (const Error&) {
      // an incomplete entry; the value is sent once it is valid
    }
  }
}

// Fashion-MNIST is offered when its four IDX files are installed (fashion_mnist_dirs()); otherwise
// the choice is greyed out with a tooltip that says how to get it or how to point at a folder.
void ConfigForm::mark_fashion_mnist(QComboBox* c) {
  const int i = c->findText("fashion-mnist");
  if (i < 0) return;
  m_fashion_dir = QString::fromStdString(find_fashion_mnist());
  auto* model = qobject_cast<QStandardItemModel*>(c->model());
  if (!model) return;
  QStandardItem* item = model->item(i);
  if (!m_fashion_dir.isEmpty()) {
    item->setEnabled(true);
    item->setText("fashion-mnist");
    item->setToolTip("Fashion-MNIST, found in " + m_fashion_dir);
    return;
  }
  QStringList where;
  for (const auto& d : fashion_mnist_dirs()) where << QString::fromStdString(d);
  item->setText("fashion-mnist");
  item->setEnabled(false);
  item->setToolTip("Fashion-MNIST is not installed (looked in " + where.join(", ") +
                   "). Install Debian's dataset-fashion-mnist, or choose a folder of IDX files with the "
                   "Path control's ... button.");
}

void ConfigForm::use_idx_folder(const QString& dir) {
  const IdxFolder f = scan_idx_folder(dir.toStdString());
  write(m_rows["data.path"], dir.toStdString());
  // A folder holding all four files switches the data set to IDX (Fashion-MNIST keeps its name);
  // a partial one stays as chosen and the start reports what is missing (check_idx_folder).
  if (f.complete()) {
    const Json name = read(m_rows["data.name"]);
    if (name != "fashion-mnist") write(m_rows["data.name"], std::string("idx"));
    if (read(m_rows["model.name"]) == "char-gpt") write(m_rows["model.name"], std::string("mlp"));
  }
  on_user_edit("data.path");
}

// Hand-made niceties: controls that do nothing under the current choices are greyed out.
void ConfigForm::update_dependencies() {
  auto val = [this](const std::string& k) -> std::string {
    auto it = m_rows.find(k);
    if (it == m_rows.end()) return {};
    const Json v = read(*it);
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  struct Dep {
    const char* key;
    const char* on;
    std::vector<std::string> values;
    bool negate = false;  // relevant unless `on` has one of `values`
  };
  static const std::vector<Dep> deps = {
      {"model.hidden", "model.name", {"mlp"}},
      {"model.preset", "model.name", {"char-gpt"}},
      {"model.layers", "model.name", {"char-gpt"}},
      {"model.heads", "model.name", {"char-gpt"}},
      {"model.dim", "model.name", {"char-gpt"}},
      {"model.context", "model.name", {"char-gpt"}},
      {"model.pad_vocab", "model.name", {"char-gpt"}},
      {"model.dropout", "model.name", {"char-gpt"}},
      {"model.activation", "model.name", {"char-gpt"}, true},
      {"data.val_fraction", "model.name", {"char-gpt"}},
      // Hidden with char-gpt (the digits' split is not its); the data.name rule below decides.
      {"data.test_fraction", "model.name", {"char-gpt"}, true},
      {"train.eval_windows", "model.name", {"char-gpt"}},
      {"optim.beta1", "optim.name", {"adamw", "adamw8bit", "lion"}},
      {"optim.beta2", "optim.name", {"adamw", "adamw8bit", "lion"}},
      {"optim.eps", "optim.name", {"adamw", "adamw8bit"}},
      {"optim.momentum", "optim.name", {"sgd"}},
      {"optim.nesterov", "optim.name", {"sgd"}},
      {"optim.block_size", "optim.name", {"adamw8bit"}},
      {"optim.stable_embedding", "optim.name", {"adamw8bit"}},
      {"optim.lion_state", "optim.name", {"lion"}},
      {"optim.adafactor_beta1", "optim.name", {"adafactor"}},
      {"optim.relative_step", "optim.name", {"adafactor"}},
      {"optim.offload", "optim.name", {"adamw", "sgd", "lion"}},
      {"schedule.min_lr", "schedule.name", {"warmup-cosine"}},
      {"precision.loss_scale.init", "precision.dtype", {"fp16"}},
      {"precision.loss_scale.growth_interval", "precision.dtype", {"fp16"}},
      {"precision.loss_scale.enabled", "precision.dtype", {"fp16"}},
      {"data.test_fraction", "data.name", {"digits"}},
      {"prune.sparsity", "prune.method", {"none", "2:4"}, true},
      {"prune.start_step", "prune.method", {"none"}, true},
      {"prune.scope", "prune.method", {"none", "2:4"}, true},
      {"prune.include_output", "prune.method", {"none"}, true},
      {"prune.initial_sparsity", "prune.method", {"gradual"}},
      {"prune.interval", "prune.method", {"gradual"}},
      {"prune.n_steps", "prune.method", {"gradual"}},
      {"prune.rewind", "prune.method", {"magnitude"}},
      {"prune.rewind_step", "prune.method", {"magnitude"}},
      {"quant.bits", "quant.mode", {"none"}, true},
      {"quant.granularity", "quant.mode", {"none"}, true},
      {"quant.group", "quant.mode", {"none"}, true},
      {"quant.overrides", "quant.mode", {"none"}, true},
      {"checkpoint.k", "checkpoint.policy", {"every-k"}},
  };
  for (auto& key : m_order) {
    Row& r = m_rows[key];
    bool relevant = true;
    for (const auto& d : deps)
      if (key == d.key && m_rows.contains(d.on)) {
        const std::string v = val(d.on);
        relevant = (std::find(d.values.begin(), d.values.end(), v) != d.values.end()) != d.negate;
      }
    const bool editable = !m_running || r.key->mid_run;
    r.field->setEnabled(editable && relevant);
    r.label->setEnabled(editable && relevant);
    // The fields of another model are hidden, not only greyed out.
    r.other_model = !relevant && std::any_of(deps.begin(), deps.end(), [&key](const Dep& d) {
      return key == d.key && std::string(d.on) == "model.name";
    });
  }
  update_preset_values();
  apply_filter(m_filter ? m_filter->text() : QString());
  update_sparsity_preview();
}

// model.layers/heads/dim/context at 0 take model.preset's value: their spin boxes show it.
void ConfigForm::update_preset_values() {
  if (!m_rows.contains("model.preset")) return;
  const Json name = read(m_rows["model.preset"]);
  if (!name.is_string()) return;
  CharGptConfig preset;
  try {
    preset = CharGptConfig::preset(name.get<std::string>());
  } catch (const Error&) {
    return;  // a preset this build does not know: the spin boxes keep their last value
  }
  const std::pair<const char*, int64_t> dims[] = {{"model.layers", preset.layers},
                                                  {"model.heads", preset.heads},
                                                  {"model.dim", preset.dim},
                                                  {"model.context", preset.context}};
  for (const auto& [key, v] : dims)
    if (auto* s = dynamic_cast<PresetSpinBox*>(editor(key))) s->set_preset_value(static_cast<int>(v));
}

// The pruning schedule as a curve over the run's steps (sparsity of the pruned weights).
void ConfigForm::update_sparsity_preview() {
  if (!m_sparsity || !m_rows.contains("prune.method")) return;
  auto num = [this](const std::string& k, double def) {
    auto it = m_rows.find(k);
    if (it == m_rows.end()) return def;
    const Json v = read(*it);
    return v.is_number() ? v.get<double>() : def;
  };
  const Json mj = read(m_rows["prune.method"]);
  const std::string method = mj.is_string() ? mj.get<std::string>() : "none";
  const double sf = num("prune.sparsity", 0.9), si = num("prune.initial_sparsity", 0), t0 = num("prune.start_step", 0),
               dt = std::max(1.0, num("prune.interval", 10)), n = std::max(1.0, num("prune.n_steps", 10));
  double end = num("train.steps", 0);
  if (end <= 0) end = std::max(t0 + n * dt, 1.0) * 1.25 + 10;
  QVector<double> xs, ys;
  const int points = 300;
  for (int i = 0; i <= points; ++i) {
    const double t = end * i / points;
    double y = 0;
    if (method == "magnitude") y = t >= t0 ? sf : 0;
    if (method == "2:4") y = t >= t0 ? 0.5 : 0;
    if (method == "gradual" && t >= t0) {
      const double k = std::min(n, std::floor((t - t0) / dt));  // pruning happens at t0 + k dt
      y = sf + (si - sf) * std::pow(1 - k / n, 3);
    }
    xs << t;
    ys << 100 * y;
  }
  m_sparsity->graph(0)->setData(xs, ys, true);
  m_sparsity->xAxis->setRange(0, end);
  m_sparsity->yAxis->setRange(0, 100);
  m_sparsity->setEnabled(method != "none");
  m_sparsity->replot(QCustomPlot::rpQueuedReplot);
}

void ConfigForm::highlight(const std::string& key) {
  auto it = m_rows.find(key);
  if (it == m_rows.end()) return;
  QWidget* w = it->editor;
  m_filter->clear();
  w->setStyleSheet("border: 2px solid #d0302f; border-radius: 3px;");
  w->setFocus(Qt::OtherFocusReason);
  for (QWidget* p = parentWidget(); p; p = p->parentWidget())
    if (auto* sa = qobject_cast<QScrollArea*>(p)) {
      sa->ensureWidgetVisible(w);
      break;
    }
  QTimer::singleShot(6000, w, [w] { w->setStyleSheet(QString()); });
}

QStringList ConfigForm::restore_start_values(const Config& start) {
  QStringList restored;
  m_loading = true;
  for (auto& key : m_order) {
    Row& r = m_rows[key];
    if (!r.key->mid_run) continue;
    const Json now = read(r), then = start.at(key);
    if (now == then) continue;
    write(r, then);
    restored << QString::fromStdString(key) + ": " + json_value_text(now) + " -> " + json_value_text(then);
  }
  m_loading = false;
  remember_config();
  if (!restored.isEmpty()) {
    update_dependencies();
    emit edited();
  }
  return restored;
}

void ConfigForm::set_running(bool running) {
  m_running = running;
  update_dependencies();
}

void ConfigForm::apply_filter(const QString& text) {
  QHash<QGroupBox*, int> visible;
  for (auto& key : m_order) {
    Row& r = m_rows[key];
    const bool show = text.isEmpty() || QString::fromStdString(key).contains(text, Qt::CaseInsensitive) ||
                      QString::fromStdString(r.key->help).contains(text, Qt::CaseInsensitive) ||
                      r.label->text().contains(text, Qt::CaseInsensitive);
    r.form->setRowVisible(r.field, show && !r.other_model);
    visible[r.group] += show && !r.other_model ? 1 : 0;
  }
  for (auto it = visible.begin(); it != visible.end(); ++it) it.key()->setVisible(it.value() > 0);
}

}  // namespace trainlab::app
