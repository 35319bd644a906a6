// SweepView: the compression sweep tables of `trainlab-cli sweep` (sweep.csv, issue 5) as three
// plots: test accuracy against bits per weight (quantization rows, one series per method and
// granularity), against sparsity (pruning rows, one series per method) and against model bytes (all
// rows, log axis), each with the dense fp32 baseline as a dashed line; the rows below in a table.
#pragma once
#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPGraph;
class QTableWidget;
class QLabel;

namespace trainlab::app {

struct SweepRow {
  QString method, granularity, note;
  double bits = 0, sparsity = 0, accuracy = 0, model_bytes = 0, bits_per_weight = 0;
};

// Parses a sweep.csv; on failure returns false and sets *error (file, line, what was expected).
bool load_sweep_csv(const QString& path, QVector<SweepRow>* rows, QString* error);

class SweepView : public QWidget {
  Q_OBJECT
 public:
  enum Plot { Bits = 0, Sparsity = 1, Bytes = 2 };
  explicit SweepView(QWidget* parent = nullptr);

  // Loads and draws a table; false (and error()) on a missing or garbled file, the view unchanged.
  bool load(const QString& path);
  // Asks for a file and loads it, with a message box on failure.
  void open_with_dialog();
  QString error() const { return m_error; }
  const QVector<SweepRow>& rows() const { return m_rows; }
  QCustomPlot* plot(Plot p) const { return m_plots[p]; }
  QCPGraph* graph(Plot p, const QString& name) const;
  QTableWidget* table() const { return m_table; }

 protected:
  void changeEvent(QEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void rebuild();
  void apply_palette();

  QCustomPlot* m_plots[3] = {};
  QTableWidget* m_table = nullptr;
  QLabel* m_title = nullptr;
  QVector<SweepRow> m_rows;
  QString m_error;
};

}  // namespace trainlab::app
