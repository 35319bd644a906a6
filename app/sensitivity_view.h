// SensitivityView: per-layer sensitivity of a run's weights to quantization and pruning, and the
// allocation of bits or sparsity under a budget (core/compress/sensitivity.h, held_out.h: what
// `trainlab-cli sensitivity` and `allocate` run, the same numbers). Two heat maps (QCPColorMap):
// held-out accuracy with one layer at a time quantized, layer x bits, and pruned, layer x
// sparsity; a budget (average bits, bytes or sparsity) and Allocate, which writes the allocated
// weights file next to the run's and shows it beside the uniform allocation. The measurement runs
// on its own thread; the table is saved as sensitivity.json in the run folder, where the report
// finds it (sensitivity_report_html).
#pragma once
#include <QPointer>
#include <QString>
#include <QWidget>
#include <functional>
#include <nlohmann/json.hpp>

class QCustomPlot;
class QCPColorMap;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QThread;

namespace trainlab::app {

class SensitivityView : public QWidget {
  Q_OBJECT
 public:
  explicit SensitivityView(QWidget* parent = nullptr);
  ~SensitivityView() override;

  // A run folder or its model.safetensors.
  void set_weights(const QString& path);
  // Starts measuring (false when busy or no weights); `finished` reports.
  bool measure();
  // Starts an allocation at the budget chosen in the view (kind: "bits", "bytes" or "sparsity").
  bool allocate(const QString& kind, double value);
  // Draws a table (SensitivityTable::to_json, as sensitivity.json holds it).
  void show_table(const nlohmann::json& table);
  const nlohmann::json& table() const { return m_table; }
  const nlohmann::json& allocation() const { return m_allocation; }
  QCPColorMap* bits_map() const { return m_bits_map; }
  QCPColorMap* sparsity_map() const { return m_sparsity_map; }
  bool busy() const { return m_busy; }

 signals:
  void finished(bool ok, const QString& message);

 private:
  void run(const QString& what, std::function<nlohmann::json()> work);
  void done(bool ok, const QString& message, const nlohmann::json& result, bool is_allocation);

  QLineEdit* m_weights = nullptr;
  QComboBox *m_data = nullptr, *m_budget_kind = nullptr, *m_method = nullptr;
  QDoubleSpinBox* m_budget = nullptr;
  QPushButton *m_measure = nullptr, *m_allocate = nullptr;
  QLabel* m_status = nullptr;
  QCustomPlot *m_bits_plot = nullptr, *m_sparsity_plot = nullptr;
  QCPColorMap *m_bits_map = nullptr, *m_sparsity_map = nullptr;
  nlohmann::json m_table, m_allocation;
  bool m_busy = false;
  QPointer<QThread> m_thread;
};

// The report's page for a run folder holding sensitivity.json: the layer x bits and layer x
// sparsity accuracies as colored tables; "" when the folder has none (or it cannot be read).
QString sensitivity_report_html(const QString& run_dir, const QString& run_name);

}  // namespace trainlab::app
