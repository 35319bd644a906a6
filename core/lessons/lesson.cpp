#include "lessons/lesson.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <sstream>

#include "util/error.h"

namespace trainlab {

namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string range_text(const LessonInput& in) {
  return std::string(in.integer ? "an integer" : "a number") + " in [" + number_text(in.lo) + ", " +
         number_text(in.hi) + "]";
}

nlohmann::json number_json(double v, bool integer = false) {
  if (!std::isfinite(v)) return nullptr;
  if (integer) return static_cast<int64_t>(v);
  return v;
}

}  // namespace

double LessonResult::figure(const std::string& key) const {
  for (const auto& f : figures)
    if (f.key == key) return f.value;
  throw Error("lesson result: no figure '" + key + "'");
}

const LessonSeries& LessonResult::series(const std::string& name) const {
  for (const auto& s : plot.series)
    if (s.name == name) return s;
  throw Error("lesson result: no series '" + name + "'");
}

LessonValues Lesson::defaults() const {
  LessonValues v;
  for (const auto& in : inputs) v[in.key] = in.def;
  return v;
}

const LessonInput& Lesson::input(const std::string& key) const {
  std::string known;
  for (const auto& in : inputs) {
    if (in.key == key) return in;
    known += (known.empty() ? "" : ", ") + in.key;
  }
  throw Error("lesson " + name + ": unknown input '" + key + "'; the inputs are " + known);
}

const std::vector<Lesson>& lesson_registry() {
  static const std::vector<Lesson> all{accumulate_lesson(),    small_values_lesson(), checkpointing_lesson(),
                                       quant_outlier_lesson(), group_quant_lesson(),  distillation_lesson()};
  return all;
}

const Lesson& find_lesson(const std::string& name) {
  std::string known;
  for (const auto& l : lesson_registry()) {
    if (l.name == name) return l;
    known += (known.empty() ? "" : ", ") + l.name;
  }
  throw Error("unknown lesson '" + name + "'; the lessons are " + known);
}

LessonValues lesson_values(const Lesson& lesson, const LessonValues& given) {
  LessonValues out = lesson.defaults();
  for (const auto& [key, v] : given) {
    const LessonInput& in = lesson.input(key);
    const bool ok = std::isfinite(v) && v >= in.lo && v <= in.hi && (!in.integer || v == std::floor(v));
    if (!ok) throw Error("lesson " + lesson.name + ": input '" + key + "' (" + in.label + "): expected " + range_text(in));
    out[key] = v;
  }
  return out;
}

void set_lesson_value(const Lesson& lesson, LessonValues& values, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos) throw Error("lesson " + lesson.name + ": --set expects key=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const LessonInput& in = lesson.input(key);
  errno = 0;
  char* end = nullptr;
  const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    throw Error("lesson " + lesson.name + ": input '" + key + "' (" + in.label + "): expected " + range_text(in));
  LessonValues one{{key, v}};
  lesson_values(lesson, one);  // the range check, with the same message
  values[key] = v;
}

LessonResult run_lesson(const Lesson& lesson, const LessonValues& given) {
  return lesson.compute(lesson_values(lesson, given));
}

nlohmann::json lesson_json(const Lesson& lesson, const LessonValues& values, const LessonResult& result) {
  nlohmann::json j;
  j["lesson"] = lesson.name;
  j["title"] = lesson.title;
  nlohmann::json inputs = nlohmann::json::object();
  for (const auto& in : lesson.inputs) inputs[in.key] = number_json(values.at(in.key), in.integer);
  j["inputs"] = inputs;
  nlohmann::json figures = nlohmann::json::object(), labels = nlohmann::json::object();
  for (const auto& f : result.figures) {
    figures[f.key] = number_json(f.value);
    labels[f.key] = f.label;
  }
  j["figures"] = figures;
  j["labels"] = labels;
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : result.plot.series) {
    nlohmann::json xs = nlohmann::json::array(), ys = nlohmann::json::array();
    for (double x : s.x) xs.push_back(number_json(x));
    for (double y : s.y) ys.push_back(number_json(y));
    series.push_back({{"name", s.name}, {"x", xs}, {"y", ys}, {"reference", s.reference}});
  }
  j["plot"] = {{"title", result.plot.title},
               {"x_label", result.plot.x_label},
               {"y_label", result.plot.y_label},
               {"log_x", result.plot.log_x},
               {"log_y", result.plot.log_y},
               {"series", series}};
  return j;
}

double lesson_normal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace trainlab
