// RunsPanel: a table of the run-record folders under a runs folder (remembered in QSettings), with
// final metrics from summary.json and the config differences from a chosen baseline run
// highlighted (Config::differences). Checked rows overlay on the plots; reopen, resume (a stopped or
// interrupted run that has a checkpoint: train/run_checkpoint.h), rename (run.name in config.json),
// delete (after confirmation), set baseline, open the folder; tags and notes (notes.json:
// train/run_notes.h) edited with "Tags..." and shown in their column, and a filter box that keeps
// the rows whose name, tags, notes or config values match every word typed ("key=value" matches a
// config key ending in "key" whose value reads "value", e.g. "dtype=bf16").
#pragma once
#include <QFileSystemWatcher>
#include <QSet>
#include <QTimer>
#include <QWidget>

#include "config/config.h"

class QTableWidget;
class QLabel;
class QLineEdit;
class QPushButton;
class QToolButton;

namespace trainlab::app {

struct RunRow {
  QString dir, name, status;
  Json config, summary;
  long checkpoint_step = 0;  // the step of its checkpoint (run.checkpoint_every); 0: none
  QStringList warnings;  // what was wrong in summary.json or notes.json (shown with the status)
  QStringList tags;
  QString notes;
};

// Whether a run matches every word of a filter text (RunsPanel's filter box; see above).
bool run_matches_filter(const RunRow& r, const QString& filter);

class RunsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunsPanel(QWidget* parent = nullptr);

  void set_root(const QString& dir);
  QString root() const { return m_root; }
  void reload();
  const QVector<RunRow>& rows() const { return m_rows; }
  QTableWidget* table() const { return m_table; }

  QStringList checked_dirs() const;
  void set_checked(const QStringList& dirs);
  QStringList selected_dirs() const;
  void select_dir(const QString& dir);
  void set_baseline(const QString& dir);
  QString baseline() const { return m_baseline; }
  void set_live_dir(const QString& dir);
  // Keys in which run `dir` differs from the baseline (run.* keys left out).
  QStringList differences(const QString& dir) const;

  // A run Resume continues: it has a checkpoint, no completed (or diverged) summary, and is not the
  // run training now.
  bool resumable(const QString& dir) const;
  QToolButton* resume_button() const { return m_resume; }

  bool rename_run(const QString& dir, const QString& name);
  // Writes dir's tags ("a, b") and notes; returns why it cannot ("" when written). The Tags...
  // dialog shows that reason and keeps the text typed.
  QString set_run_notes(const QString& dir, const QString& tags, const QString& notes);
  // Hides the rows that do not match (run_matches_filter); the filter box calls it.
  void set_filter(const QString& text);
  QLineEdit* filter_box() const { return m_filter; }
  // Deletes run folders; asks first when `confirm`. Returns how many were removed.
  int delete_runs(const QStringList& dirs, bool confirm = true);

 signals:
  void overlay_changed(const QStringList& dirs);
  void reopen_requested(const QString& dir);
  void resume_requested(const QString& dir);
  void export_requested(const QStringList& dirs);
  void root_changed(const QString& dir);
  // rename_run wrote a new run.name ("" = none) into dir's config.json.
  void renamed(const QString& dir, const QString& name);
  // set_baseline chose the run the others are compared with.
  void baseline_changed(const QString& dir);
  // set_run_notes wrote dir's notes.json.
  void notes_changed(const QString& dir);

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void fill();
  void fit_columns();
  QToolButton* more_button();
  void context_menu(const QPoint& pos);
  void choose_root();
  void update_resume_button();
  void edit_notes(const QString& dir);
  void apply_filter();

  QString m_root, m_baseline, m_live;
  QVector<RunRow> m_rows;
  QSet<QString> m_checked;
  QTableWidget* m_table = nullptr;
  QLabel* m_root_label = nullptr;
  QToolButton* m_resume = nullptr;
  QLineEdit* m_filter = nullptr;
  QFileSystemWatcher m_watcher;
  QTimer m_reload_timer;
  bool m_filling = false;
  QVector<int> m_natural;  // each column's width for its contents (at most 260 px), from fill()
};

}  // namespace trainlab::app
