// MainWindow's layout: the controls column (config form, run buttons, presets), the plots in the
// centre, and the docks. The window's behaviour is main_window.cpp, its menus main_window_menus.cpp.
#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QDockWidget>
#include <QFrame>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <fstream>

#include "backend/backend.h"
#include "data/dataset.h"
#include "lessons_view.h"
#include "report.h"
#include "sweep_view.h"
#include "train/run_checkpoint.h"
#include "train/run_record.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab::app {

void MainWindow::build_ui() {
  QWidget* left = build_controls();
  QWidget* centre = build_centre();
  m_runs = new RunsPanel(this);
  m_vsplit = new QSplitter(Qt::Vertical, this);
  m_vsplit->addWidget(centre);
  m_vsplit->addWidget(m_runs);
  m_vsplit->setStretchFactor(0, 4);
  m_vsplit->setStretchFactor(1, 1);
  m_vsplit->setSizes({720, 200});
  m_hsplit = new QSplitter(Qt::Horizontal, this);
  m_hsplit->addWidget(left);
  m_hsplit->addWidget(m_vsplit);
  m_hsplit->setStretchFactor(0, 0);
  m_hsplit->setStretchFactor(1, 1);
  m_hsplit->setCollapsible(1, false);
  setCentralWidget(m_hsplit);
  build_docks();
  resize(1500, 940);
  fill_presets();
}

// The left region: run buttons, progress and status, presets, and the generated config form.
QWidget* MainWindow::build_controls() {
  auto* left = new QWidget(this);
  auto* lv = new QVBoxLayout(left);
  lv->setContentsMargins(6, 6, 2, 4);
  lv->setSpacing(6);
  build_run_buttons(left, lv);
  build_preset_row(left, lv);
  m_form = new ConfigForm;
  auto* scroll = new QScrollArea(left);
  scroll->setWidget(m_form);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setFrameShape(QFrame::NoFrame);
  lv->addWidget(scroll, 1);
  left->setMinimumWidth(m_form->sizeHint().width() + scroll->verticalScrollBar()->sizeHint().width() + 12);
  return left;
}

// Start / Pause / Stop, the progress bar and the status line.
void MainWindow::build_run_buttons(QWidget* left, QVBoxLayout* lv) {
  auto* buttons = new QHBoxLayout;
  m_start = new QPushButton(style()->standardIcon(QStyle::SP_MediaPlay), "Start", left);
  m_start->setObjectName("start_button");
  m_start->setToolTip("Start a run with these settings (Ctrl+R)");
  m_start->setDefault(true);
  m_pause = new QPushButton(style()->standardIcon(QStyle::SP_MediaPause), "Pause", left);
  m_pause->setObjectName("pause_button");
  m_pause->setToolTip("Pause or resume the run at the next step (Ctrl+P)");
  m_stop = new QPushButton(style()->standardIcon(QStyle::SP_MediaStop), "Stop", left);
  m_stop->setObjectName("stop_button");
  m_stop->setToolTip("Stop the run at the next step; its record and summary are kept (Ctrl+.)");
  for (auto* b : {m_start, m_pause, m_stop}) {
    b->setMinimumHeight(30);
    buttons->addWidget(b);
  }
  connect(m_start, &QPushButton::clicked, this, [this] { start_run(); });
  connect(m_pause, &QPushButton::clicked, this, &MainWindow::toggle_pause);
  connect(m_stop, &QPushButton::clicked, this, &MainWindow::stop_run);
  lv->addLayout(buttons);

  m_progress = new QProgressBar(left);
  m_progress->setRange(0, 1);
  m_progress->setValue(0);
  m_progress->setTextVisible(true);
  m_progress->setFormat("idle");
  lv->addWidget(m_progress);
  m_status = new QLabel("Choose settings and press Start.", left);
  m_status->setObjectName("run_status");
  m_status->setWordWrap(true);
  m_status->setMinimumHeight(m_status->fontMetrics().height() * 2 + 4);
  lv->addWidget(m_status);
}

// The preset chooser with Open... and Save... (config JSON files, as trainlab-cli --config takes).
void MainWindow::build_preset_row(QWidget* left, QVBoxLayout* lv) {
  auto* preset_row = new QHBoxLayout;
  m_presets = new QComboBox(left);
  m_presets->setObjectName("presets");
  m_presets->setToolTip("Shipped and saved presets: JSON config files, the same that trainlab-cli --config takes");
  auto* load = new QToolButton(left);
  load->setText("Open...");
  load->setToolTip("Load a config JSON file (Ctrl+O)");
  auto* save = new QToolButton(left);
  save->setText("Save...");
  save->setToolTip("Save these settings as a config JSON file (Ctrl+S)");
  preset_row->addWidget(new QLabel("Preset", left));
  preset_row->addWidget(m_presets, 1);
  preset_row->addWidget(load);
  preset_row->addWidget(save);
  lv->addLayout(preset_row);
  connect(m_presets, &QComboBox::activated, this, [this](int i) {
    const QString path = m_presets->itemData(i).toString();
    if (!path.isEmpty()) load_preset(path);
  });
  connect(load, &QToolButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, "Open config", preset_dirs().value(0), "Config (*.json)");
    if (!f.isEmpty()) load_preset(f);
  });
  connect(save, &QToolButton::clicked, this, [this] {
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/presets";
    QDir().mkpath(dir);
    const QString f = QFileDialog::getSaveFileName(this, "Save config", dir + "/my-preset.json", "Config (*.json)");
    if (!f.isEmpty()) save_preset(f);
  });
}

// The centre region: the dismissable message bar over the live plots.
QWidget* MainWindow::build_centre() {
  auto* centre = new QWidget(this);
  auto* cv = new QVBoxLayout(centre);
  cv->setContentsMargins(2, 4, 4, 0);
  cv->setSpacing(2);
  m_message = new QFrame(centre);
  m_message->setObjectName("message_bar");
  m_message->setFrameShape(QFrame::StyledPanel);
  auto* mh = new QHBoxLayout(m_message);
  mh->setContentsMargins(8, 4, 4, 4);
  m_message_label = new QLabel(m_message);
  m_message_label->setWordWrap(true);
  m_message_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* close = new QToolButton(m_message);
  close->setText("Dismiss");
  close->setAutoRaise(true);
  connect(close, &QToolButton::clicked, m_message, &QWidget::hide);
  mh->addWidget(m_message_label, 1);
  mh->addWidget(close);
  m_message->hide();
  cv->addWidget(m_message);
  m_plots = new PlotPanel(centre);
  cv->addWidget(m_plots, 1);
  return centre;
}

// The docks on the right, hidden until asked for: text generation, kernel times, system metrics
// and the ranks (which shows itself when the shown run trains over several ranks).
void MainWindow::build_docks() {
  m_text = new TextPanel(this);
  m_text_dock = new QDockWidget("Text generation (char-gpt)", this);
  m_text_dock->setObjectName("text_dock");
  m_text_dock->setWidget(m_text);
  addDockWidget(Qt::RightDockWidgetArea, m_text_dock);
  m_text_dock->hide();
  m_kernels = new KernelPanel(this);
  m_kernel_dock = new QDockWidget("Kernel times", this);
  m_kernel_dock->setObjectName("kernel_dock");
  m_kernel_dock->setWidget(m_kernels);
  addDockWidget(Qt::RightDockWidgetArea, m_kernel_dock);
  m_kernel_dock->hide();
  connect(m_kernel_dock, &QDockWidget::visibilityChanged, this, [this](bool shown) {
    if (shown) m_kernels->refresh();
  });
  m_roofline = new RooflineView(this);
  m_roofline_dock = new QDockWidget("Roofline", this);
  m_roofline_dock->setObjectName("roofline_dock");
  m_roofline_dock->setWidget(m_roofline);
  addDockWidget(Qt::RightDockWidgetArea, m_roofline_dock);
  m_roofline_dock->hide();
  connect(m_roofline_dock, &QDockWidget::visibilityChanged, this, [this](bool shown) {
    if (shown) m_roofline->refresh();
  });
  m_ranks = new RanksPanel(this);
  // Two ranks' bars and their labels side by side; 420 px made the window wider than a 1280 px
  // screen (issue 41).
  m_ranks->setMinimumWidth(340);
  m_ranks_dock = new QDockWidget("Ranks", this);
  m_ranks_dock->setObjectName("ranks_dock");
  m_ranks_dock->setWidget(m_ranks);
  addDockWidget(Qt::RightDockWidgetArea, m_ranks_dock);
  m_ranks_dock->hide();
  connect(m_ranks_dock, &QDockWidget::visibilityChanged, this, [this](bool shown) {
    if (shown) m_ranks->refresh();
  });
  m_system = new SystemView(this);
  m_system_dock = new QDockWidget("System metrics", this);
  m_system_dock->setObjectName("system_dock");
  m_system_dock->setWidget(m_system);
  addDockWidget(Qt::RightDockWidgetArea, m_system_dock);
  m_system_dock->hide();
  connect(m_system_dock, &QDockWidget::visibilityChanged, this, [this](bool shown) {
    if (!shown) return;
    if (m_primary && m_primary != m_live && !m_primary->dir.isEmpty())
      m_system->show_run(m_primary->dir);  // read when asked for: the plots' series do not keep it
    else
      m_system->refresh();
  });
}

}  // namespace trainlab::app
