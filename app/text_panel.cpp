#include "text_panel.h"

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>

#include "backend/backend.h"
#include "decode/speculative.h"
#include "decode/text_generation.h"
#include "util/error.h"

namespace trainlab::app {

TextPanel::TextPanel(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  auto* wrow = new QHBoxLayout;
  m_weights = new QLineEdit(this);
  m_weights->setPlaceholderText("a char-gpt run (reopen one) or its model.safetensors");
  m_weights->setToolTip("Weights of a trained char-gpt: a run folder's model.safetensors");
  auto* browse = new QToolButton(this);
  browse->setText("...");
  connect(browse, &QToolButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, "char-gpt weights", m_weights->text(), "Weights (*.safetensors)");
    if (!f.isEmpty()) m_weights->setText(f);
  });
  wrow->addWidget(m_weights, 1);
  wrow->addWidget(browse);
  form->addRow("Model", wrow);
  m_prompt = new QLineEdit("ROMEO:", this);
  m_prompt->setObjectName("prompt");
  m_prompt->setToolTip("Text to continue (characters of the model's vocabulary)");
  form->addRow("Prompt", m_prompt);
  m_temperature = new QDoubleSpinBox(this);
  m_temperature->setRange(0, 5);
  m_temperature->setSingleStep(0.1);
  m_temperature->setValue(0.8);
  m_temperature->setToolTip("Sampling temperature T: p_i ~ exp(logit_i / T). 0 picks the most likely character "
                            "(greedy); below 1 sharper and more repetitive, above 1 more random.");
  form->addRow("Temperature", m_temperature);
  m_tokens = new QSpinBox(this);
  m_tokens->setRange(1, 100000);
  m_tokens->setValue(300);
  m_tokens->setObjectName("characters");
  m_tokens->setToolTip("Characters to generate (one token is one character)");
  m_sample_count = new QSpinBox(this);
  m_sample_count->setObjectName("samples");
  m_sample_count->setRange(1, static_cast<int>(kMaxDecodeBatch));
  m_sample_count->setToolTip("Continuations of the prompt decoded side by side by one batched decoder (a KV cache "
                             "each, one read of the weights a step for all), each sampled with its own stream");
  auto* trow = new QHBoxLayout;
  trow->addWidget(m_tokens, 1);
  trow->addWidget(new QLabel("Samples", this));
  trow->addWidget(m_sample_count);
  form->addRow("Characters", trow);
  auto* drow = new QHBoxLayout;
  m_draft = new QLineEdit(this);
  m_draft->setObjectName("draft");
  m_draft->setPlaceholderText("none: decode with the model alone");
  m_draft->setToolTip("Speculative decoding: a draft char-gpt weights file (a smaller model trained on the same text, "
                      "or the int4 copy `trainlab-cli quantize --bits 4` writes) proposes K characters, the model checks "
                      "them in one pass and keeps its own distribution exactly");
  auto* dbrowse = new QToolButton(this);
  dbrowse->setText("...");
  connect(dbrowse, &QToolButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, "draft weights", m_draft->text(), "Weights (*.safetensors)");
    if (!f.isEmpty()) m_draft->setText(f);
  });
  m_speculate = new QSpinBox(this);
  m_speculate->setObjectName("speculate");
  m_speculate->setRange(1, kMaxSpeculate);
  m_speculate->setValue(4);
  m_speculate->setPrefix("K = ");
  m_speculate->setToolTip("Characters the draft proposes a round");
  drow->addWidget(m_draft, 1);
  drow->addWidget(dbrowse);
  drow->addWidget(m_speculate);
  form->addRow("Draft", drow);
  device_rows(form);
  v->addLayout(form);
  auto* row = new QHBoxLayout;
  m_go = new QPushButton("Generate", this);
  m_go->setObjectName("generate_button");
  m_speed = new QLabel(this);
  m_speed->setObjectName("speed");
  m_speed->setWordWrap(true);
  row->addWidget(m_go);
  row->addWidget(m_speed, 1);
  v->addLayout(row);
  m_out = new QPlainTextEdit(this);
  m_out->setReadOnly(true);
  m_out->setFont(QFont("Monospace"));
  // An empty box said nothing of what fills it.
  m_out->setPlaceholderText("Generate samples the model's continuation of the prompt here (a char-gpt run's "
                            "weights: reopen one, or choose its model.safetensors with ...).");
  v->addWidget(m_out, 1);
  connect(m_go, &QPushButton::clicked, this, [this] { generate(); });
  connect(m_prompt, &QLineEdit::returnPressed, this, [this] { generate(); });
}

// Device, weight format and, on a GPU, how a token runs (the options of `trainlab-cli generate`), in
// two rows: in one the dock was 588 px at least, too wide beside the window on a 1280 px screen.
void TextPanel::device_rows(QFormLayout* form) {
  auto* frow = new QHBoxLayout;
  m_device = new QComboBox(this);
  m_device->setObjectName("device");
  m_device->addItem("CPU", "cpu");
  m_device->addItem("GPU if there is one", "auto");
  m_device->addItem("GPU", "cuda");
  m_device->setToolTip("Where to decode (trainlab-cli generate --device): the GPU decoder keeps the matrices in the "
                       "format below and runs a token as a CUDA graph of kernels");
  m_format = new QComboBox(this);
  m_format->setObjectName("format");
  m_format->addItem("the file's own", "");
  for (const char* f : {"fp32", "bf16", "int8", "int4"}) m_format->addItem(f, f);
  m_format->setToolTip("The matrices' format while decoding (--weight-format): a quantized file decodes in its own "
                       "format by default, a trained file in fp32; bf16, int8 and int4 read fewer bytes a token "
                       "(on the CPU the decoder computes with the values the format represents)");
  m_gpu_decoder = new QComboBox(this);
  m_gpu_decoder->setObjectName("gpu_decoder");
  m_gpu_decoder->addItem("kernel graph", "graph");
  m_gpu_decoder->addItem("one kernel a token", "one");
  m_gpu_decoder->addItem("kernels one by one", "eager");
  m_gpu_decoder->setToolTip("How the GPU runs a token: a kernel per operation replayed as one CUDA graph (the "
                            "default, the fastest), the whole token as one cooperative kernel (--one-kernel), or the "
                            "kernels launched one by one (--no-graph); the same tokens, other speeds");
  const auto follow = [this] { m_gpu_decoder->setEnabled(m_device->currentData().toString() != "cpu"); };
  connect(m_device, &QComboBox::currentIndexChanged, this, follow);
  follow();
  // Both shrink to a few characters (elided) in a narrow dock; their items show in full when opened.
  for (QComboBox* c : {m_device, m_gpu_decoder}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(6);
  }
  frow->addWidget(m_device, 1);
  frow->addWidget(new QLabel("GPU", this));
  frow->addWidget(m_gpu_decoder, 1);
  form->addRow("Device", frow);
  form->addRow("Format", m_format);
}

// The generation thread reads the weights and calls back through qApp: it must not run on while
// the app tears down (after main() returns it would race the process's exit). Its result, queued
// to qApp, finds no panel and is dropped.
TextPanel::~TextPanel() {
  if (!m_thread) return;
  m_stop = true;
  m_thread->wait();
  delete m_thread.data();  // its deleteLater would need an event loop that may not run again
}

void TextPanel::set_weights(const QString& path) {
  QString p = path;
  if (QFileInfo(p).isDir()) p += "/model.safetensors";
  m_weights->setText(p);
}

QString TextPanel::weights() const { return m_weights->text(); }

void TextPanel::set_samples(int samples) { m_sample_count->setValue(samples); }

bool TextPanel::set_device(const QString& device) {
  const int i = m_device->findData(device);
  if (i < 0) return false;
  m_device->setCurrentIndex(i);
  return true;
}

bool TextPanel::set_format(const QString& format) {
  const int i = m_format->findData(format);
  if (i < 0) return false;
  m_format->setCurrentIndex(i);
  return true;
}

bool TextPanel::set_gpu_decoder(const QString& mode) {
  const int i = m_gpu_decoder->findData(mode);
  if (i < 0) return false;
  m_gpu_decoder->setCurrentIndex(i);
  return true;
}

void TextPanel::set_draft(const QString& path, int speculate) {
  QString p = path;
  if (!p.isEmpty() && QFileInfo(p).isDir()) p += "/model.safetensors";
  m_draft->setText(p);
  m_speculate->setValue(speculate);
}

namespace {
// The line under the Generate button: tokens/s, the device, format and decoder (and why "GPU if
// there is one" fell back to the CPU), and with a draft the speculative figures.
QString speed_line(const GenerateResult& g) {
  const QString where = QString("%1, %2: %3")
                            .arg(QString::fromStdString(g.device), QString::fromStdString(g.format),
                                 QString::fromStdString(g.decoder));
  QString s = g.samples.size() > 1 ? QString("%1 tokens/s over all %2 samples (%3)")
                                         .arg(g.tokens_per_s, 0, 'f', 0)
                                         .arg(g.samples.size())
                                         .arg(where)
                                   : QString("%1 tokens/s (%2)").arg(g.tokens_per_s, 0, 'f', 0).arg(where);
  if (!g.notice.empty()) s += " — " + QString::fromStdString(g.notice);
  if (!g.speculative) return s;
  const SpeculativeSummary& p = *g.speculative;
  return s + QString(" — speculative, K = %1, %2 draft: %3% accepted, %4 tokens a target pass, %5x the model alone "
                     "(%6 tokens/s)")
                 .arg(p.speculate)
                 .arg(QString::fromStdString(p.draft_format))
                 .arg(100.0 * p.acceptance_rate, 0, 'f', 1)
                 .arg(p.tokens_per_pass, 0, 'f', 2)
                 .arg(p.speedup, 0, 'f', 2)
                 .arg(p.baseline_tokens_per_s, 0, 'f', 0);
}
// The output box: the one text, or a labelled block a sample.
QString sample_blocks(const QStringList& texts) {
  if (texts.size() == 1) return texts.front();
  QStringList blocks;
  for (qsizetype b = 0; b < texts.size(); ++b)
    blocks << QString("— sample %1 of %2 —\n%3").arg(b + 1).arg(texts.size()).arg(texts[b]);
  return blocks.join("\n\n");
}
}  // namespace
QString TextPanel::output() const { return m_out->toPlainText(); }

bool TextPanel::generate() {
  if (m_busy) return false;
  const std::string weights = m_weights->text().toStdString();
  const std::string prompt = m_prompt->text().isEmpty() ? std::string("\n") : m_prompt->text().toStdString();
  const float temperature = static_cast<float>(m_temperature->value());
  const int64_t n = m_tokens->value();
  const std::string draft = m_draft->text().toStdString();
  const int speculate = m_speculate->value(), samples = m_sample_count->value();
  const std::string device = m_device->currentData().toString().toStdString();
  const std::string format = m_format->currentData().toString().toStdString();
  const QString gpu = m_gpu_decoder->currentData().toString();
  const bool one_kernel = gpu == "one", graph = gpu != "eager";
  if (weights.empty()) {
    m_out->setPlainText("Choose a trained char-gpt run first (train one with model.name = char-gpt, then reopen it).");
    return false;
  }
  m_busy = true;
  m_go->setEnabled(false);
  m_speed->setText("generating...");
  QPointer<TextPanel> self(this);
  m_stop = false;
  const std::atomic<bool>* stop = &m_stop;  // the panel waits for this thread before it goes
  QThread* t = QThread::create([self, weights, prompt, temperature, n, stop, draft, speculate, samples, device, format, one_kernel,
                                  graph] {
    QString result, speed;
    QStringList texts;
    bool ok = false;
    double tps = 0, acceptance = 0, speedup = 0;
    try {
      // The library's generation (decode/text_generation.h), as `trainlab-cli generate` runs it:
      // the same tokens for the same file, prompt and sampling options.
      GenerateRequest req;
      req.weights = weights;
      req.device = device;
      if (!format.empty()) req.format = DecodeSpec::parse(format, 32);
      req.prompt = prompt;
      req.tokens = n;
      req.sample.temperature = temperature;
      req.sample.stop = stop;
      req.draft = draft;
      req.speculate = speculate;
      req.samples = samples;
      req.one_kernel = one_kernel;
      req.cuda_graph = graph;
      const GenerateResult out = generate_text(req);
      for (const std::string& text : out.samples) texts << QString::fromStdString(prompt + text);
      result = sample_blocks(texts);
      tps = out.tokens_per_s;
      speed = speed_line(out);
      if (out.speculative) acceptance = out.speculative->acceptance_rate, speedup = out.speculative->speedup;
      ok = true;
    } catch (const std::exception& e) {
      result = QString::fromStdString(describe_exception(e, "generating text"));
    }
    QMetaObject::invokeMethod(
        qApp,
        [self, ok, result, texts, tps, speed, acceptance, speedup] {
          if (!self) return;
          self->m_busy = false;
          self->m_go->setEnabled(true);
          self->m_tokens_per_s = tps;
          self->m_acceptance = acceptance;
          self->m_speedup = speedup;
          self->m_samples = texts;
          self->m_out->setPlainText(ok ? result : "Cannot generate: " + result);
          self->m_speed->setText(ok ? speed : QString());
          emit self->generated(ok, result);
        },
        Qt::QueuedConnection);
  });
  connect(t, &QThread::finished, t, &QObject::deleteLater);
  t->setObjectName("text generation");  // the thread's name in ps, top and debuggers
  m_thread = t;
  t->start();
  return true;
}

}  // namespace trainlab::app
