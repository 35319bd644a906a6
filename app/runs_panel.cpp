#include "runs_panel.h"

#include <cmath>
#include <QAction>
#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QTableWidget>
#include <QStyle>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <fstream>

#include "run_series.h"
#include "train/run_checkpoint.h"
#include "train/run_notes.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab::app {

namespace {
// A label that shows as much of its text as its width allows, elided (a long runs folder path
// made the window wider than a 1280-pixel screen); with Qt::ElideNone all of it or nothing (a
// hint cut to "ti..." says nothing). The whole text is its tooltip.
class ElidingLabel : public QLabel {
 public:
  ElidingLabel(Qt::TextElideMode mode, QWidget* parent) : QLabel(parent), m_mode(mode) {}
  // The whole text where there is room; down to a few characters (or none) where there is not.
  QSize sizeHint() const override {
    return {fontMetrics().horizontalAdvance(m_full) + 8, QLabel::sizeHint().height()};
  }
  QSize minimumSizeHint() const override { return {m_mode == Qt::ElideNone ? 0 : 40, QLabel::minimumSizeHint().height()}; }
  void set_full_text(const QString& t) {
    m_full = t;
    setToolTip(t);
    updateGeometry();
    elide();
  }

 protected:
  void resizeEvent(QResizeEvent* e) override {
    QLabel::resizeEvent(e);
    elide();
  }

 private:
  void elide() {
    const QString shown = fontMetrics().elidedText(m_full, m_mode == Qt::ElideNone ? Qt::ElideRight : m_mode, width());
    setText(m_mode == Qt::ElideNone && shown != m_full ? QString() : shown);
  }
  Qt::TextElideMode m_mode;
  QString m_full;
};
}  // namespace


namespace {

enum Col { CName, CStatus, CModel, CPrecision, CDevice, CSteps, CTestAcc, CTestLoss, CSpeed, CPeak, CDiff, CTags, CCount };
const char* kHeaders[CCount] = {"Run",       "Status",      "Model",     "Precision",
                                "Device",    "Steps",       "Test acc",  "Test loss",
                                "Samples/s", "Peak memory", "Differences from baseline", "Tags"};

Json read_json(const QString& path) {
  std::ifstream in(path.toStdString());
  if (!in) return nullptr;
  try {
    Json j;
    in >> j;
    return j;
  } catch (const std::exception&) {
    return nullptr;
  }
}

// summary.json through the core's reader: a field of the wrong type is dropped, and said.
Json read_summary(const QString& path, QStringList& warnings) {
  const QFileInfo fi(path);
  if (!fi.exists()) return nullptr;
  QFile f(path);
  if (!fi.isFile() || !f.open(QIODevice::ReadOnly)) {
    warnings << path + ": cannot be read; ignored";
    return nullptr;
  }
  const QByteArray bytes = f.read(64 << 20);
  std::vector<std::string> w;
  Json s = parse_summary_json(std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())), path.toStdString(), w);
  for (const auto& x : w) warnings << QString::fromStdString(x);
  return s;
}

}  // namespace

RunsPanel::RunsPanel(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(4, 2, 4, 4);
  v->setSpacing(3);
  auto* bar = new QHBoxLayout;
  auto* title = new QLabel("<b>Runs</b>", this);
  m_root_label = new ElidingLabel(Qt::ElideMiddle, this);
  m_root_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_root_label->setEnabled(false);
  auto button = [&](const QString& text, const QString& tip, auto fn) {
    auto* b = new QToolButton(this);
    b->setText(text);
    b->setToolTip(tip);
    b->setAutoRaise(true);
    connect(b, &QToolButton::clicked, this, fn);
    bar->addWidget(b);
    return b;
  };
  bar->addWidget(title);
  bar->addWidget(m_root_label, 1);
  auto* hint = new ElidingLabel(Qt::ElideNone, this);
  hint->set_full_text("tick runs to overlay them on the plots");
  hint->setEnabled(false);
  bar->addWidget(hint);
  button("Reopen", "Show the selected run on the plots and load its settings into the controls", [this] {
    const auto s = selected_dirs();
    if (!s.isEmpty()) emit reopen_requested(s.first());
  });
  m_resume = button("Resume",
                    "Continue the selected stopped or interrupted run from its last checkpoint "
                    "(runs started with run.checkpoint_every > 0)",
                    [this] {
                      const auto s = selected_dirs();
                      if (!s.isEmpty() && resumable(s.first())) emit resume_requested(s.first());
                    });
  m_resume->setObjectName("resume_button");
  button("Tags...", "Tags and notes of the selected run (notes.json in its folder; shown in reports)", [this] {
    const auto s = selected_dirs();
    if (!s.isEmpty()) edit_notes(s.first());
  })->setObjectName("tags_button");
  button("Export...", "Export a report (PDF or HTML) of the ticked runs, or of the selected ones", [this] {
    QStringList d = checked_dirs();
    if (d.isEmpty()) d = selected_dirs();
    emit export_requested(d);
  });
  bar->addWidget(more_button());
  v->addLayout(bar);
  m_filter = new QLineEdit(this);
  m_filter->setObjectName("runs_filter");
  m_filter->setClearButtonEnabled(true);
  m_filter->setPlaceholderText("Filter runs: name, tag, notes or config value; key=value (e.g. dtype=bf16)");
  connect(m_filter, &QLineEdit::textChanged, this, [this] { apply_filter(); });
  v->addWidget(m_filter);

  m_table = new QTableWidget(0, CCount, this);
  m_table->setObjectName("runs_table");
  for (int c = 0; c < CCount; ++c) m_table->setHorizontalHeaderItem(c, new QTableWidgetItem(kHeaders[c]));
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->setVisible(false);
  m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  m_table->setContextMenuPolicy(Qt::CustomContextMenu);
  m_table->setWordWrap(false);
  m_table->viewport()->installEventFilter(this);  // fit_columns on each resize
  connect(m_table, &QTableWidget::customContextMenuRequested, this, &RunsPanel::context_menu);
  connect(m_table, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* it) {
    if (m_filling || it->column() != CName) return;
    const QString dir = it->data(Qt::UserRole).toString();
    if (it->checkState() == Qt::Checked)
      m_checked.insert(dir);
    else
      m_checked.remove(dir);
    emit overlay_changed(checked_dirs());
  });
  connect(m_table, &QTableWidget::itemSelectionChanged, this, &RunsPanel::update_resume_button);
  connect(m_table, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (row >= 0 && row < m_rows.size()) emit reopen_requested(m_rows[row].dir);
  });
  v->addWidget(m_table, 1);

  m_reload_timer.setSingleShot(true);
  m_reload_timer.setInterval(400);
  connect(&m_reload_timer, &QTimer::timeout, this, &RunsPanel::reload);
  connect(&m_watcher, &QFileSystemWatcher::directoryChanged, this, [this] { m_reload_timer.start(); });
}

void RunsPanel::set_root(const QString& dir) {
  const QString abs = QDir(dir).absolutePath();
  QDir().mkpath(abs);
  if (!m_watcher.directories().isEmpty()) m_watcher.removePaths(m_watcher.directories());
  m_root = abs;
  m_watcher.addPath(abs);
  static_cast<ElidingLabel*>(m_root_label)->set_full_text(QDir::toNativeSeparators(abs));
  reload();
  emit root_changed(abs);
}

void RunsPanel::choose_root() {
  const QString d = QFileDialog::getExistingDirectory(this, "Runs folder", m_root);
  if (!d.isEmpty()) set_root(d);
}

void RunsPanel::reload() {
  m_rows.clear();
  QDir root(m_root);
  const auto entries = root.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name | QDir::Reversed);
  for (const QFileInfo& fi : entries) {
    const QString dir = fi.absoluteFilePath();
    if (!QFile::exists(dir + "/config.json")) continue;
    RunRow r;
    r.dir = dir;
    r.config = read_json(dir + "/config.json");
    if (!r.config.is_object()) continue;
    r.summary = read_summary(dir + "/summary.json", r.warnings);
    r.name = RunSeries::display_name(r.config, dir);
    std::vector<std::string> note_warnings;
    const RunNotes notes = read_run_notes(dir.toStdString(), note_warnings);
    for (const auto& t : notes.tags) r.tags << QString::fromStdString(t);
    r.notes = QString::fromStdString(notes.notes);
    for (const auto& w : note_warnings) r.warnings << QString::fromStdString(w);
    r.status = r.summary.is_object() ? QString::fromStdString(r.summary.value("status", std::string("completed")))
                                     : (dir == m_live ? "running" : "unfinished");
    try {
      const auto ck = read_run_checkpoint(dir.toStdString());
      r.checkpoint_step = ck ? ck->progress.step : 0;
    } catch (const Error&) {
      r.checkpoint_step = 0;  // damaged: Resume would only fail (the error says why on the command line)
    }
    m_rows.push_back(r);
  }
  if (!m_baseline.isEmpty() && !QFile::exists(m_baseline + "/config.json")) m_baseline.clear();
  if (m_baseline.isEmpty() && !m_rows.isEmpty()) m_baseline = m_rows.back().dir;  // the oldest run
  QSet<QString> still;
  for (const auto& r : m_rows)
    if (m_checked.contains(r.dir)) still.insert(r.dir);
  const bool checked_changed = still != m_checked;
  m_checked = still;
  fill();
  if (checked_changed) emit overlay_changed(checked_dirs());
}

QStringList RunsPanel::differences(const QString& dir) const {
  const RunRow *a = nullptr, *b = nullptr;
  for (const auto& r : m_rows) {
    if (r.dir == dir) a = &r;
    if (r.dir == m_baseline) b = &r;
  }
  if (!a || !b || a == b) return {};
  QStringList out;
  for (const auto& k : Config::differences(Config::from_record(a->config), Config::from_record(b->config)))
    if (k.rfind("run.", 0) != 0) out << QString::fromStdString(k);
  return out;
}

void RunsPanel::fill() {
  m_filling = true;
  const QStringList sel = selected_dirs();
  m_table->setRowCount(m_rows.size());
  QColor hl = palette().color(QPalette::Highlight);
  hl.setAlpha(70);
  const QColor warn(220, 120, 0, 90), bad(220, 40, 40, 90);
  for (int i = 0; i < m_rows.size(); ++i) {
    const RunRow& r = m_rows[i];
    const Json flat = flatten_config(r.config);
    auto cfg = [&](const char* k) { return flat.contains(k) ? json_value_text(flat[k]) : QString(); };
    auto sum_num = [&](const char* k) { return summary_number(r.summary, k); };  // NaN: no value
    const QStringList diffs = differences(r.dir);
    auto set = [&](int c, const QString& text, const QString& key = {}) {
      auto* it = new QTableWidgetItem(text);
      it->setData(Qt::UserRole, r.dir);
      if (!key.isEmpty() && diffs.contains(key)) {
        it->setBackground(hl);
        QFont f = it->font();
        f.setBold(true);
        it->setFont(f);
      }
      if (c >= CSteps && c <= CPeak) it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      m_table->setItem(i, c, it);
      return it;
    };
    QString name = r.name;
    if (r.dir == m_baseline) name += "  [baseline]";
    auto* n = set(CName, name);
    n->setFlags(n->flags() | Qt::ItemIsUserCheckable);
    n->setCheckState(m_checked.contains(r.dir) ? Qt::Checked : Qt::Unchecked);
    n->setToolTip(QDir::toNativeSeparators(r.dir));
    auto* st = set(CStatus, r.status);
    if (r.status == "diverged" || r.status == "failed") st->setBackground(bad);
    if (r.status == "stopped" || r.status == "unfinished") st->setBackground(warn);
    QStringList tip = r.warnings;
    if (r.summary.is_object() && r.summary.contains("message"))
      tip.prepend(QString::fromStdString(r.summary.value("message", std::string())));
    st->setToolTip(tip.join("\n"));
    if (resumable(r.dir))
      st->setToolTip((st->toolTip().isEmpty() ? QString() : st->toolTip() + "\n") +
                     QString("checkpoint at step %1: Resume continues the run").arg(r.checkpoint_step));
    set(CModel, cfg("model.name"), "model.name");
    // A run switched mid-run shows where it ended: "fp32 → bf16".
    QString precision = cfg("precision.dtype");
    const QString final_precision =
        r.summary.is_object() ? QString::fromStdString(r.summary.value("precision", std::string())) : QString();
    if (!final_precision.isEmpty() && final_precision != precision) precision += " \u2192 " + final_precision;
    set(CPrecision, precision, "precision.dtype");
    set(CDevice, r.summary.is_object() ? QString::fromStdString(r.summary.value("device", std::string())) : cfg("device.name"),
        "device.name");
    if (r.summary.is_object()) {
      set(CSteps, number_text(sum_num("steps"), 'f', 0));
      set(CTestAcc, number_text(100 * sum_num("test_accuracy"), 'f', 2, " %"));
      set(CTestLoss, loss_text(sum_num("test_loss")));
      const double speed = sum_num("samples_per_s");
      set(CSpeed, std::isnan(speed) ? number_text(speed, 'f', 0) : QLocale::system().toString(speed, 'f', 0));
      const double peak = summary_peak_bytes(r.summary);
      set(CPeak, format_bytes(peak));
    } else {
      for (int c = CSteps; c <= CPeak; ++c) set(c, "");
    }
    QStringList dtext;
    for (const QString& k : diffs) dtext << k + " = " + (flat.contains(k.toStdString()) ? json_value_text(flat[k.toStdString()]) : "?");
    auto* d = set(CDiff, r.dir == m_baseline ? "(baseline)" : dtext.isEmpty() ? "same config" : dtext.join(", "));
    if (!diffs.isEmpty()) d->setBackground(hl);
    d->setToolTip(dtext.join("\n"));
    auto* tags = set(CTags, r.tags.join(", "));
    tags->setToolTip(r.notes);
    if (!r.notes.isEmpty()) n->setToolTip(n->toolTip() + "\n\n" + r.notes);
  }
  m_table->resizeColumnsToContents();
  m_natural.clear();
  for (int c = 0; c < CCount; ++c) m_natural << std::min(m_table->columnWidth(c) + 8, 260);
  fit_columns();
  for (const QString& s : sel) select_dir(s);
  apply_filter();
  m_filling = false;
  update_resume_button();
}

// The columns at their contents' widths where the table is wide enough. In a narrower one (a
// 1280-wide window) the Differences column, what a comparison is read for, was pushed past the
// right edge with its header cut ("Differen"): the differences themselves and then the run names
// give way (elided; their tooltips hold the whole text) until the Differences column ends inside
// the table with its whole header. The Tags column (the last, stretched) takes what is left.
void RunsPanel::fit_columns() {
  if (m_natural.size() != CCount) return;
  QHeaderView* h = m_table->horizontalHeader();
  const int margin = 2 * h->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, h) + 12;
  auto header_width = [&](int c) { return h->fontMetrics().horizontalAdvance(kHeaders[c]) + margin; };
  QVector<int> w = m_natural;
  int over = -m_table->viewport()->width();
  for (int c = 0; c <= CDiff; ++c) over += w[c];
  for (const auto& [c, least] : {std::pair{int(CDiff), 0}, std::pair{int(CName), 80}}) {
    const int cut = std::clamp(over, 0, std::max(0, w[c] - std::max(least, header_width(c))));
    w[c] -= cut;
    over -= cut;
  }
  for (int c = 0; c < CTags; ++c) m_table->setColumnWidth(c, w[c]);
}

// The table's viewport, not the panel: its width is known only once the table's layout has run.
bool RunsPanel::eventFilter(QObject* o, QEvent* e) {
  if (o == m_table->viewport() && e->type() == QEvent::Resize) fit_columns();
  return QWidget::eventFilter(o, e);
}

bool RunsPanel::resumable(const QString& dir) const {
  for (const auto& r : m_rows)
    if (r.dir == dir)
      return r.checkpoint_step > 0 && dir != m_live && r.status != "completed" && r.status != "diverged";
  return false;
}

void RunsPanel::update_resume_button() {
  const QStringList sel = selected_dirs();
  m_resume->setEnabled(sel.size() == 1 && resumable(sel.first()));
}

QStringList RunsPanel::checked_dirs() const {
  QStringList l;
  for (const auto& r : m_rows)  // table order: newest first
    if (m_checked.contains(r.dir)) l << r.dir;
  return l;
}

void RunsPanel::set_checked(const QStringList& dirs) {
  m_checked.clear();
  for (const auto& d : dirs) m_checked.insert(QDir(d).absolutePath());
  fill();
  emit overlay_changed(checked_dirs());
}

QStringList RunsPanel::selected_dirs() const {
  QStringList l;
  for (auto* it : m_table->selectedItems())
    if (it->column() == CName) l << it->data(Qt::UserRole).toString();
  return l;
}

void RunsPanel::select_dir(const QString& dir) {
  for (int i = 0; i < m_rows.size(); ++i)
    if (m_rows[i].dir == dir) m_table->selectRow(i);
}

void RunsPanel::set_baseline(const QString& dir) {
  m_baseline = QDir(dir).absolutePath();
  fill();
  emit baseline_changed(m_baseline);
}

void RunsPanel::set_live_dir(const QString& dir) {
  m_live = dir.isEmpty() ? QString() : QDir(dir).absolutePath();
  reload();
}

bool RunsPanel::rename_run(const QString& dir, const QString& name) {
  Json j = read_json(dir + "/config.json");
  if (!j.is_object()) return false;
  j["run"]["name"] = name.toStdString();
  const std::string path = (dir + "/config.json").toStdString();
  {
    std::ofstream out(path + ".part", std::ios::trunc);
    if (!out) {
      QMessageBox::warning(this, "Rename run", "Cannot write " + dir + "/config.json (read-only folder?).");
      return false;
    }
    out << j.dump(2) << "\n";
  }
  QFile::remove(dir + "/config.json");
  QFile::rename(QString::fromStdString(path + ".part"), dir + "/config.json");
  reload();
  emit renamed(dir, name);
  return true;
}

bool run_matches_filter(const RunRow& r, const QString& filter) {
  const QStringList words = filter.split(' ', Qt::SkipEmptyParts);
  if (words.isEmpty()) return true;
  const Json flat = flatten_config(r.config);
  auto word_matches = [&](const QString& w) {
    const int eq = w.indexOf('=');
    if (eq > 0) {  // key=value: a config key ending in "key" whose value reads "value"
      const QString key = w.left(eq), value = w.mid(eq + 1);
      for (auto it = flat.begin(); it != flat.end(); ++it) {
        const QString k = QString::fromStdString(it.key());
        if ((k == key || k.endsWith("." + key)) && json_value_text(it.value()).compare(value, Qt::CaseInsensitive) == 0)
          return true;
      }
      return false;
    }
    if (r.name.contains(w, Qt::CaseInsensitive) || r.notes.contains(w, Qt::CaseInsensitive) ||
        r.status.compare(w, Qt::CaseInsensitive) == 0)
      return true;
    for (const QString& t : r.tags)
      if (t.contains(w, Qt::CaseInsensitive)) return true;
    for (auto it = flat.begin(); it != flat.end(); ++it)
      if (json_value_text(it.value()).compare(w, Qt::CaseInsensitive) == 0) return true;
    return false;
  };
  return std::all_of(words.begin(), words.end(), word_matches);
}

void RunsPanel::set_filter(const QString& text) {
  m_filter->setText(text);  // textChanged applies it
  apply_filter();
}

void RunsPanel::apply_filter() {
  const QString f = m_filter->text();
  for (int i = 0; i < m_rows.size() && i < m_table->rowCount(); ++i)
    m_table->setRowHidden(i, !run_matches_filter(m_rows[i], f));
}

QString RunsPanel::set_run_notes(const QString& dir, const QString& tags, const QString& notes) {
  try {
    RunNotes n;
    n.tags = parse_tags(tags.toStdString());
    n.notes = notes.trimmed().toStdString();
    write_run_notes(dir.toStdString(), n);
  } catch (const Error& e) {
    return QString::fromStdString(e.what());
  }
  reload();
  emit notes_changed(dir);
  return {};
}

void RunsPanel::edit_notes(const QString& dir) {
  const RunRow* row = nullptr;
  for (const auto& r : m_rows)
    if (r.dir == dir) row = &r;
  if (!row) return;
  QDialog d(this);
  d.setWindowTitle("Tags and notes: " + row->name);
  auto* form = new QFormLayout(&d);
  auto* tags = new QLineEdit(row->tags.join(", "), &d);
  tags->setPlaceholderText("comma-separated, e.g. baseline, lr-sweep");
  auto* notes = new QPlainTextEdit(row->notes, &d);
  form->addRow("Tags:", tags);
  form->addRow("Notes:", notes);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, &d);
  connect(buttons, &QDialogButtonBox::accepted, &d, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  form->addRow(buttons);
  d.resize(520, 300);
  while (d.exec() == QDialog::Accepted) {
    const QString error = set_run_notes(dir, tags->text(), notes->toPlainText());
    if (error.isEmpty()) return;
    QMessageBox::warning(this, "Tags and notes", error);  // the dialog again, with what was typed
  }
}

int RunsPanel::delete_runs(const QStringList& dirs, bool confirm) {
  if (dirs.isEmpty()) return 0;
  QStringList names;
  for (const auto& d : dirs) names << QFileInfo(d).fileName();
  if (confirm) {
    const auto answer = QMessageBox::question(
        this, "Delete runs",
        QString("Delete %1 run folder(s) and everything in them?\n\n%2").arg(dirs.size()).arg(names.join("\n")),
        QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
    if (answer != QMessageBox::Yes) return 0;
  }
  int n = 0;
  for (const auto& d : dirs) {
    if (d == m_live) continue;  // the running run keeps its folder
    // Only folders that are run records, and only below the runs folder or holding config.json.
    if (!QFile::exists(d + "/config.json")) continue;
    if (QDir(d).removeRecursively()) ++n;
    m_checked.remove(d);
  }
  reload();
  emit overlay_changed(checked_dirs());
  return n;
}

// The rarer actions in a menu: as eight buttons in a row the panel was 635 px wide at least, and the
// window with a dock wider than a 1280 px screen (issue 41).
QToolButton* RunsPanel::more_button() {
  auto* more = new QToolButton(this);
  more->setObjectName("runs_more_button");
  more->setText("More");
  more->setToolTip("Baseline, rename, delete, and the folder of the runs");
  more->setAutoRaise(true);
  more->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(more);
  menu->addAction("Baseline", this, [this] {
    const auto s = selected_dirs();
    if (!s.isEmpty()) set_baseline(s.first());
  })->setToolTip("Compare every run with the selected one (differences are highlighted)");
  menu->addAction("Rename...", this, [this] {
    const auto s = selected_dirs();
    if (s.isEmpty()) return;
    QString cur;
    for (const auto& r : m_rows)
      if (r.dir == s.first()) cur = r.name;
    bool ok = false;
    const QString n = QInputDialog::getText(this, "Rename run",
                                            "The run's name in the table, plots and reports\n(run.name in its config.json):",
                                            QLineEdit::Normal, cur, &ok);
    if (ok) rename_run(s.first(), n);
  })->setToolTip("Give the selected run a label (run.name in its config.json)");
  menu->addAction("Delete...", this, [this] { delete_runs(selected_dirs(), true); })
      ->setToolTip("Delete the selected run folders (asks first)");
  menu->addSeparator();
  menu->addAction("Folder...", this, [this] { choose_root(); })->setToolTip("Choose the folder that holds the run records");
  menu->setToolTipsVisible(true);
  more->setMenu(menu);
  return more;
}

void RunsPanel::context_menu(const QPoint& pos) {
  const auto sel = selected_dirs();
  if (sel.isEmpty()) return;
  QMenu m(this);
  m.addAction("Reopen", this, [this, sel] { emit reopen_requested(sel.first()); });
  QAction* resume = m.addAction("Resume", this, [this, sel] { emit resume_requested(sel.first()); });
  resume->setEnabled(sel.size() == 1 && resumable(sel.first()));
  m.addAction("Overlay selected", this, [this, sel] {
    for (const auto& d : sel) m_checked.insert(d);
    fill();
    emit overlay_changed(checked_dirs());
  });
  m.addAction("Set as baseline", this, [this, sel] { set_baseline(sel.first()); });
  m.addAction("Tags and notes...", this, [this, sel] { edit_notes(sel.first()); });
  m.addAction("Export report...", this, [this, sel] { emit export_requested(sel); });
  m.addAction("Open folder", this, [sel] { QDesktopServices::openUrl(QUrl::fromLocalFile(sel.first())); });
  m.addSeparator();
  m.addAction("Delete...", this, [this, sel] { delete_runs(sel, true); });
  m.exec(m_table->viewport()->mapToGlobal(pos));
}

}  // namespace trainlab::app
