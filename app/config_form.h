// ConfigForm: one control per config key, generated from config_schema() and grouped by section
// (so keys added to the schema by new features appear without touching the app). Int -> spin box,
// Float -> spin box with scientific text, Bool -> check box, Enum -> combo box, IntList and String
// -> line edit; hand-made niceties for the device (a combo of available_devices()) and data.path
// (a file chooser). Each tooltip is the key's help text. Only the chosen model's fields show, and
// the char-gpt dimensions at 0 ("from model.preset") show the preset's value. While a run trains only the keys with
// mid_run=true stay editable, and editing one emits live_changed(key, value).
#pragma once
#include <QHash>
#include <QLineEdit>
#include <QMap>
#include <QWidget>
#include <string>

#include "config/config.h"

class QFormLayout;
class QGroupBox;
class QLabel;
class QCustomPlot;
class QComboBox;

namespace trainlab::app {

class ConfigForm : public QWidget {
  Q_OBJECT
 public:
  explicit ConfigForm(QWidget* parent = nullptr);

  void set_config(const Config& c);
  // The config the controls describe. Throws Error naming the key when a control holds a bad value.
  Config config() const;
  void set_running(bool running);
  QWidget* editor(const std::string& key) const;
  QStringList keys() const;
  // Sets one control from a JSON value (as if the user had edited it).
  void set_value(const std::string& key, const Json& v);
  Json value(const std::string& key) const;
  // After a run: sets the live keys changed while it trained back to its start values (what its
  // record's config.json says), so the controls never show a switched value as the start one.
  // Returns one "key: switched -> start" line per key set back.
  QStringList restore_start_values(const Config& start);
  // Draws attention to a control (an error names its key): scrolls to it and outlines it.
  void highlight(const std::string& key);

 signals:
  void live_changed(const QString& key, const QString& value_json);
  void edited();

 private:
  struct Row {
    const ConfigKey* key = nullptr;
    QWidget* editor = nullptr;  // the input widget
    QWidget* field = nullptr;   // what sits in the form (editor, or editor + button)
    QLabel* label = nullptr;
    QFormLayout* form = nullptr;
    QGroupBox* group = nullptr;
    bool other_model = false;  // a field of a model other than the chosen one: hidden
  };
  QWidget* make_editor(const ConfigKey& k);
  void on_user_edit(const std::string& key);
  void update_dependencies();
  void update_sparsity_preview();
  void update_preset_values();
  void mark_fashion_mnist(QComboBox* c);
  void apply_filter(const QString& text);
  Json read(const Row& r) const;
  void write(Row& r, const Json& v);

  QMap<std::string, Row> m_rows;
  std::vector<std::string> m_order;
  bool m_loading = false;
  bool m_running = false;
  QLineEdit* m_filter = nullptr;
  QCustomPlot* m_sparsity = nullptr;
  QString m_fashion_dir;  // where Fashion-MNIST is installed ("" when it is not)

 public:
  // Folder of the installed Fashion-MNIST ("" when not installed).
  QString fashion_mnist_dir() const { return m_fashion_dir; }
  // As if the user chose this folder with the data path's "IDX folder" button: sets data.path and,
  // when the folder holds all four IDX files, data.name = idx (a classifier model for char-gpt).
  void use_idx_folder(const QString& dir);
};

}  // namespace trainlab::app
