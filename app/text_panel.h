// TextPanel: text generation with a trained char-gpt run (model.safetensors): prompt, temperature,
// number of characters, Generate; the output and the tokens per second. Generation runs on its own
// thread (KV-cache sampling on the CPU, fp32 masters), so the window stays responsive; destroying
// the panel stops the generation after its current token and waits for the thread, so it never
// outlives the app.
#pragma once
#include <QPointer>
#include <QWidget>
#include <atomic>

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
  // Starts generating; returns false when busy or nothing to use. `generated` reports the result.
  bool generate();
  QString output() const;
  double tokens_per_s() const { return m_tokens_per_s; }
  bool busy() const { return m_busy; }

 signals:
  void generated(bool ok, const QString& text_or_error);

 private:
  QLineEdit *m_weights = nullptr, *m_prompt = nullptr;
  QDoubleSpinBox* m_temperature = nullptr;
  QSpinBox* m_tokens = nullptr;
  QPushButton* m_go = nullptr;
  QPlainTextEdit* m_out = nullptr;
  QLabel* m_speed = nullptr;
  double m_tokens_per_s = 0;
  bool m_busy = false;
  QPointer<QThread> m_thread;  // the generation running now (deletes itself when it ends)
  std::atomic<bool> m_stop{false};  // set as the panel goes: the generation ends after its token
};

}  // namespace trainlab::app
