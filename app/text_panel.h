// TextPanel: text generation with a trained char-gpt run (model.safetensors): prompt, temperature,
// number of characters, Generate; the output and the tokens per second. With a draft weights file
// (a smaller char-gpt trained on the same text, or `trainlab-cli quantize`'s int4 copy) and K, it
// decodes speculatively (decode/speculative.h, as `trainlab-cli generate --draft --speculate`) and
// shows the acceptance rate, tokens a target pass and the speed-up over the target alone. With
// Samples B > 1 it decodes B continuations side by side (as `trainlab-cli generate --samples B`,
// seed 1) and shows one labelled block a sample and the tokens/s of all samples. Device (CPU, GPU
// if there is one, GPU) and Format (the file's own, fp32, bf16, int8, int4) choose the decoder as
// `generate --device --weight-format` do; the line under Generate names the device, format and
// decoder. Generation runs on its own thread (KV-cache sampling), so the window stays responsive; destroying
// the panel stops the generation after its current token and waits for the thread, so it never
// outlives the app.
#pragma once
#include <QPointer>
#include <QStringList>
#include <QWidget>
#include <atomic>

class QComboBox;
class QFormLayout;
class QLineEdit;
class QPlainTextEdit;
class QDoubleSpinBox;
class QSpinBox;
class QLabel;
class QPushButton;
class QThread;

namespace trainlab::app {

class TextPanel : public QWidget {
  Q_OBJECT
 public:
  explicit TextPanel(QWidget* parent = nullptr);
  ~TextPanel() override;
  // A run folder or a weights file.
  void set_weights(const QString& path);
  QString weights() const;
  // A draft weights file for speculative decoding ("" = off) and its K (proposals a round).
  void set_draft(const QString& path, int speculate);
  double acceptance_rate() const { return m_acceptance; }
  double speedup() const { return m_speedup; }
  // Starts generating; returns false when busy or nothing to use. `generated` reports the result.
  bool generate();
  QString output() const;
  // Continuations decoded side by side (1..kMaxDecodeBatch), and the texts of the last generation
  // (prompt included), one a sample.
  void set_samples(int samples);
  // The decoding device ("cpu", "auto" or "cuda", as --device) and the matrices' format ("" = the
  // file's own, or fp32, bf16, int8, int4 as --weight-format); unknown values are refused (false).
  bool set_device(const QString& device);
  bool set_format(const QString& format);
  // "graph" (the default), "one" (one kernel a token) or "eager" (kernels one by one); used on a GPU only.
  bool set_gpu_decoder(const QString& mode);
  const QStringList& samples() const { return m_samples; }
  double tokens_per_s() const { return m_tokens_per_s; }
  bool busy() const { return m_busy; }

 signals:
  void generated(bool ok, const QString& text_or_error);

 private:
  void device_rows(QFormLayout* form);

  QLineEdit *m_weights = nullptr, *m_prompt = nullptr, *m_draft = nullptr;
  QSpinBox* m_speculate = nullptr;
  double m_acceptance = 0, m_speedup = 0;
  QDoubleSpinBox* m_temperature = nullptr;
  QSpinBox *m_tokens = nullptr, *m_sample_count = nullptr;
  QComboBox *m_device = nullptr, *m_format = nullptr, *m_gpu_decoder = nullptr;
  QStringList m_samples;
  QPushButton* m_go = nullptr;
  QPlainTextEdit* m_out = nullptr;
  QLabel* m_speed = nullptr;
  double m_tokens_per_s = 0;
  bool m_busy = false;
  QPointer<QThread> m_thread;  // the generation running now (deletes itself when it ends)
  std::atomic<bool> m_stop{false};  // set as the panel goes: the generation ends after its token
};

}  // namespace trainlab::app
