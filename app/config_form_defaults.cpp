// ConfigForm's switch defaults (config/run_defaults.h) and the marks of the fields the user set.
#include <QGroupBox>
#include <algorithm>
#include <QLabel>

#include "config/run_defaults.h"
#include "config_form.h"
#include "run_series.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

// "Steps", "Eval every", "Lr": a field's label as the form shows it, without marks.
QString switch_field_name(const std::string& key) {
  QString k = QString::fromStdString(key.substr(key.find('.') + 1));
  k.replace('.', ' ').replace('_', ' ');
  if (!k.isEmpty()) k[0] = k[0].toUpper();
  return k;
}

// What was switched to: "char-gpt tiny", "the MLP", "lion".
QString switched_to(const Config& c, const Config& before) {
  if (c.get_string("optim.name") != before.get_string("optim.name") &&
      c.get_string("model.name") == before.get_string("model.name") &&
      c.get_string("model.preset") == before.get_string("model.preset"))
    return QString::fromStdString(c.get_string("optim.name"));
  return QString::fromStdString(default_run_name(c.get_string("model.name"), c.get_string("model.preset")));
}

}  // namespace

void ConfigForm::remember_config() {
  try {
    m_last = config();
  } catch (const Error&) {
    // a control holds an incomplete value: the last whole config stays the reference
  }
}

void ConfigForm::apply_switch_defaults_from(const Config& before) {
  Config c;
  try {
    c = config();
  } catch (const Error&) {
    return;  // an incomplete entry elsewhere; the start reports it
  }
  const std::vector<std::string> changed = apply_switch_defaults(c, before, m_user_keys);
  m_loading = true;
  QStringList set;
  for (const std::string& key : changed) {
    write(m_rows[key], c.at(key));
    set << switch_field_name(key) + " " + json_value_text(c.at(key));
  }
  m_loading = false;
  QStringList kept;
  const auto& model_keys = model_switch_keys();
  const auto& optim_keys = optimizer_switch_keys();
  for (const std::string& key : m_user_keys)
    if (std::find(model_keys.begin(), model_keys.end(), key) != model_keys.end() ||
        std::find(optim_keys.begin(), optim_keys.end(), key) != optim_keys.end())
      kept << switch_field_name(key);
  if (set.isEmpty() && kept.isEmpty()) return;
  QString line = "Defaults of " + switched_to(c, before) + ": " + (set.isEmpty() ? QString("none changed") : set.join(", "));
  if (!kept.isEmpty()) line += "; kept your " + kept.join(", ");
  emit defaults_applied(line + ".");
}

// A field the user set shows a pencil after its label, and its tooltip says that switching the
// model or optimizer keeps it.
void ConfigForm::mark_user_key(const std::string& key, bool mine) {
  auto it = m_rows.find(key);
  if (it == m_rows.end()) return;
  Row& r = *it;
  if (mine) m_user_keys.insert(key);
  else m_user_keys.erase(key);
  r.label->setText(mine ? r.label_html + " <span style='color:#c26d00' title='set by you'>&#9998;</span>" : r.label_html);
  QString tip = r.editor->toolTip();
  const QString note = "<p><b>&#9998; Set by you:</b> switching the model or optimizer keeps this value.</p>";
  tip.remove(note);
  if (mine) tip.prepend(note);
  r.editor->setToolTip(tip);
  r.label->setToolTip(tip);
}

QStringList ConfigForm::user_keys() const {
  QStringList l;
  for (const std::string& k : m_user_keys) l << QString::fromStdString(k);
  return l;
}

void ConfigForm::apply_user_settings(const std::vector<std::pair<std::string, std::string>>& sets) {
  const Config before = config();
  Config c = before;
  std::set<std::string> chosen = m_user_keys;
  for (const auto& [key, text] : sets) {
    c.set(key, text);
    chosen.insert(key);
  }
  const std::vector<std::string> changed = apply_switch_defaults(c, before, chosen);
  m_loading = true;
  for (const std::string& key : m_order) write(m_rows[key], c.at(key));
  m_loading = false;
  for (const auto& kv : sets) mark_user_key(kv.first, true);
  update_dependencies();
  remember_config();
  if (!changed.empty()) {
    QStringList set;
    for (const std::string& key : changed) set << switch_field_name(key) + " " + json_value_text(c.at(key));
    emit defaults_applied("Defaults of " + switched_to(c, before) + ": " + set.join(", ") + ".");
  }
  emit edited();
}

}  // namespace trainlab::app
