#include "text_panel.h"

#include <QApplication>
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
  m_tokens->setToolTip("Characters to generate (one token is one character)");
  form->addRow("Characters", m_tokens);
  v->addLayout(form);
  auto* row = new QHBoxLayout;
  m_go = new QPushButton("Generate", this);
  m_go->setObjectName("generate_button");
  m_speed = new QLabel(this);
  row->addWidget(m_go);
  row->addWidget(m_speed, 1);
  v->addLayout(row);
  m_out = new QPlainTextEdit(this);
  m_out->setReadOnly(true);
  m_out->setFont(QFont("Monospace"));
  v->addWidget(m_out, 1);
  connect(m_go, &QPushButton::clicked, this, [this] { generate(); });
  connect(m_prompt, &QLineEdit::returnPressed, this, [this] { generate(); });
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
QString TextPanel::output() const { return m_out->toPlainText(); }

bool TextPanel::generate() {
  if (m_busy) return false;
  const std::string weights = m_weights->text().toStdString();
  const std::string prompt = m_prompt->text().isEmpty() ? std::string("\n") : m_prompt->text().toStdString();
  const float temperature = static_cast<float>(m_temperature->value());
  const int64_t n = m_tokens->value();
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
  QThread* t = QThread::create([self, weights, prompt, temperature, n, stop] {
    QString result;
    bool ok = false;
    double tps = 0;
    try {
      // The library's generation (decode/text_generation.h), as `trainlab-cli generate` runs it:
      // the same tokens for the same file, prompt and sampling options.
      GenerateRequest req;
      req.weights = weights;
      req.device = "cpu";
      req.prompt = prompt;
      req.tokens = n;
      req.sample.temperature = temperature;
      req.sample.stop = stop;
      const GenerateResult out = generate_text(req);
      result = QString::fromStdString(prompt + out.text);
      tps = out.tokens_per_s;
      ok = true;
    } catch (const std::exception& e) {
      result = QString::fromLocal8Bit(e.what());
    }
    QMetaObject::invokeMethod(
        qApp,
        [self, ok, result, tps] {
          if (!self) return;
          self->m_busy = false;
          self->m_go->setEnabled(true);
          self->m_tokens_per_s = tps;
          self->m_out->setPlainText(ok ? result : "Cannot generate: " + result);
          self->m_speed->setText(ok ? QString("%1 tokens/s (KV cache, CPU)").arg(tps, 0, 'f', 0) : QString());
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
