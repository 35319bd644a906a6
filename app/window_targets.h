// The views and dialogs `trainlab --view NAME` and `--dialog NAME` open at start-up, so that a
// scripted screenshot (tools/screenshots.sh) or a user reaches each without a click: the View
// menu's docks and windows, and the dialogs of the menus and the runs table.
#pragma once
#include <QString>
#include <QStringList>

class QWidget;

namespace trainlab::app {
class MainWindow;

// The names --view takes: main (the window itself), the docks (kernels, roofline, text, ranks,
// system) and the windows (planner, sweep, parallel, pipeline: the shown run's measured schedule).
QStringList view_names();
// The names --dialog takes: about, export (File > Export report), tags (the runs table's Tags...
// of the shown run), rename (its Rename...), open-config (File > Open config).
QStringList dialog_names();

// Opens view `name` (`arg`: the sweep's CSV file for sweep) and returns the widget a screenshot
// saves: the main window for a dock, else the view's own window. Null, with `error` saying what
// was expected, for an unknown name or a missing argument.
QWidget* open_view(MainWindow& w, const QString& name, const QString& arg, QString& error);

// Opens dialog `name` once the event loop runs (it is modal: its exec() returns when the app
// quits). An unknown name: false, with `error` naming the choices. The dialog is then
// QApplication::activeModalWidget().
bool open_dialog(MainWindow& w, const QString& name, QString& error);

}  // namespace trainlab::app
