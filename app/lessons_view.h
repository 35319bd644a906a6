// LessonsView (Help > Lessons, issue 22): the worked examples of core/lessons/ in one window. A
// list of the lessons on the left; on the right the chosen lesson's text, its inputs as spin boxes
// built from the registry (each with the input's range, so nothing out of range can be entered),
// its figures as a table and its series as a plot. Changing an input recomputes at once with the
// core's own code (lessons/lesson.h), the numbers `trainlab-cli lesson` prints. There is no code
// for any one lesson here: a new lesson in the registry appears with its controls.
// Each lesson keeps its inputs while another is shown; values() hands them to the report's appendix.
#pragma once
#include <QDoubleSpinBox>
#include <QString>
#include <QWidget>
#include <map>
#include <string>

#include "lessons/lesson.h"

class QCustomPlot;
class QFormLayout;
class QLabel;
class QListWidget;
class QTableWidget;

namespace trainlab::app {

// A figure as the view and the report write it: 7 significant digits, "none" for NaN, "inf".
QString format_lesson_number(double v);

// A spin box that reads and writes numbers like 1e-08 (a plain QDoubleSpinBox rounds them to its
// decimals): integers as integers, other values with 6 significant digits.
class LessonSpinBox : public QDoubleSpinBox {
  Q_OBJECT
 public:
  LessonSpinBox(const LessonInput& input, QWidget* parent);
  QString textFromValue(double v) const override;
  double valueFromText(const QString& text) const override;
  QValidator::State validate(QString& text, int& pos) const override;

 private:
  bool m_integer;
};

class LessonsView : public QWidget {
  Q_OBJECT
 public:
  explicit LessonsView(QWidget* parent = nullptr);

  // Shows lesson `name` (a registry name); false when there is none.
  bool select_lesson(const QString& name);
  QString current_lesson() const { return m_current; }
  // The spin box of input `key` of the current lesson (nullptr when none).
  LessonSpinBox* input(const QString& key) const;
  QTableWidget* table() const { return m_table; }
  QCustomPlot* plot() const { return m_plot; }
  QString error() const { return m_error_text; }
  // The text of the table's value cell for figure `key` (empty when absent).
  QString figure_text(const QString& key) const;
  // Every lesson's current inputs (the defaults of a lesson never shown).
  std::map<std::string, LessonValues> values() const;

 signals:
  void recomputed();

 protected:
  void changeEvent(QEvent* e) override;

 private:
  void build_inputs(const Lesson& lesson);
  void recompute();
  void show_result(const LessonResult& r);
  void draw_plot(const LessonPlot& p);

  QListWidget* m_list = nullptr;
  QLabel* m_title = nullptr;
  QLabel* m_text = nullptr;
  QLabel* m_error = nullptr;
  QWidget* m_inputs = nullptr;
  QFormLayout* m_form = nullptr;
  QTableWidget* m_table = nullptr;
  QCustomPlot* m_plot = nullptr;
  QString m_current;
  QString m_error_text;
  std::map<std::string, LessonValues> m_values;  // per lesson, once shown
  std::map<std::string, LessonSpinBox*> m_spins;  // the current lesson's
};

}  // namespace trainlab::app
