// ConfigForm: one control per config key, generated from config_schema() and grouped by section
// (so keys added to the schema by new features appear without touching the app). Int -> spin box,
// Float -> spin box with scientific text, Bool -> check box, Enum -> combo box, IntList and String
// -> line edit; hand-made niceties for the device (a combo of available_devices()) and data.path
// (a file chooser). Each tooltip is the key's help text. Only the chosen model's fields show, and
// the char-gpt dimensions at 0 ("from model.preset") show the preset's value. While a run trains only the keys with
// mid_run=true stay editable, and editing one emits live_changed(key, value).
//
// Choosing another model, char-gpt preset or optimizer gives its defaults (config/run_defaults.h:
// run length, batch, learning rate, evaluation interval, data set, run name; an optimizer's rate,
// betas and decay) to every field the user has not set themselves since the config was loaded;
// the fields they set keep their values and are marked (config_form_defaults.cpp).
#pragma once
#include <QHash>
#include <set>
#include <utility>
#include <vector>
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
  // Sets keys from text as the user's own (the app's --set KEY=VALUE): each is validated (Error
  // names the key), marked as set by the user, and a switched model or optimizer brings its
  // defaults to the other fields, as when the user chooses it in the form.
  void apply_user_settings(const std::vector<std::pair<std::string, std::string>>& sets);
  // The keys the user set since the config was loaded (kept, and marked, when defaults apply).
  QStringList user_keys() const;

 signals:
  void live_changed(const QString& key, const QString& value_json);
  void edited();
  // A switch brought the defaults of `what` ("char-gpt tiny", "lion"): one line that says which
  // fields changed and which of the user's were kept.
  void defaults_applied(const QString& line);

 private:
  struct Row {
    const ConfigKey* key = nullptr;
    QWidget* editor = nullptr;  // the input widget
    QWidget* field = nullptr;   // what sits in the form (editor, or editor + button)
    QLabel* label = nullptr;
    QFormLayout* form = nullptr;
    QGroupBox* group = nullptr;
    QString label_html;  // the label without the "set by you" mark
    bool other_model = false;  // a field of a model other than the chosen one: hidden
  };
  QWidget* init_run_field(QWidget* parent, QLineEdit* le);
  QWidget* make_editor(const ConfigKey& k);
  void on_user_edit(const std::string& key);
  void update_dependencies();
  void update_sparsity_preview();
  void update_preset_values();
  void mark_fashion_mnist(QComboBox* c);
  // config_form_defaults.cpp: the defaults of a switched model or optimizer, and the marks.
  void apply_switch_defaults_from(const Config& before);
  void mark_user_key(const std::string& key, bool mine);
  void remember_config();
  void apply_filter(const QString& text);
  Json read(const Row& r) const;
  void write(Row& r, const Json& v);

  QMap<std::string, Row> m_rows;
  std::vector<std::string> m_order;
  bool m_loading = false;
  std::set<std::string> m_user_keys;  // set by the user since set_config
  Config m_last;                      // the controls' config before the edit in progress
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
