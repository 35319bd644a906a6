// Lessons (issue 22): the textbook's worked examples, computed live by the lab's own code.
//
// A lesson is a short text, a few numeric inputs (each with a default and a closed range) and a
// compute function that runs the core's own pieces -- the format rounding of tensor/dtype.h, the
// MemoryLedger and the nn layers, the quantizers of tensor/quant_format.h and the backend's int8
// and distillation operations -- and returns named figures (a table) and one plot of series.
// Nothing here re-implements what those layers compute: a lesson only arranges their inputs.
//
// The registry (lesson_registry) is what `trainlab-cli lesson` and the app's Lessons view both
// read, so the two show the same numbers for the same inputs. The lessons themselves live in
// lessons_precision.cpp (accumulate, small-values), lessons_checkpoint.cpp (checkpointing),
// lessons_quant.cpp (quant-outlier, group-quant) and lessons_distill.cpp (distillation).
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace trainlab {

struct LessonInput {
  std::string key;    // "n": the name of --set key=value and of the JSON inputs
  std::string label;  // "copies N": what the view writes beside its control
  std::string help;   // one sentence
  double def = 0.0;
  double lo = 0.0, hi = 0.0;  // closed range
  bool integer = false;
};

// The inputs of one run of a lesson, by key. lesson_values() fills in the defaults.
using LessonValues = std::map<std::string, double>;

// One number of the table. NaN or an infinity is a value the format cannot hold or a quantity that
// does not exist for these inputs (an accumulator that never stalls): JSON writes it as null.
struct LessonFigure {
  std::string key;    // "bf16.stalled_at"
  std::string label;  // "bf16: the sum it stalls at"
  double value = 0.0;
};

struct LessonSeries {
  std::string name;
  std::vector<double> x, y;
  bool reference = false;  // a line to compare with (the exact value), drawn dashed
};

struct LessonPlot {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;  // a log axis skips the points <= 0 (and every plot non-finite ones)
  std::vector<LessonSeries> series;
};

struct LessonResult {
  std::vector<LessonFigure> figures;
  LessonPlot plot;
  // The value of figure `key`; throws Error naming the key when there is none.
  double figure(const std::string& key) const;
  const LessonSeries& series(const std::string& name) const;  // throws Error naming the series
};

struct Lesson {
  std::string name;   // "accumulate"
  std::string title;  // "Accumulating in low precision"
  std::string text;   // a short paragraph: what to look at
  std::vector<LessonInput> inputs;
  // Takes validated values (every input present and in range).
  std::function<LessonResult(const LessonValues&)> compute;

  LessonValues defaults() const;
  const LessonInput& input(const std::string& key) const;  // throws Error naming the known keys
};

// Every lesson, in the order the view and `lesson --list` show them.
const std::vector<Lesson>& lesson_registry();
// Throws Error "unknown lesson 'x'; the lessons are a, b, ..." for an unknown name.
const Lesson& find_lesson(const std::string& name);

// `given` checked against the lesson's inputs and completed with the defaults: an unknown key, a
// value that is not finite, out of its range or not an integer where one is expected is an Error
// "lesson NAME: input 'KEY' ...: expected ... in [lo, hi]".
LessonValues lesson_values(const Lesson& lesson, const LessonValues& given);
// Parses "key=value" (the CLI's --set) into `values`, strictly: a missing '=', an unknown key or a
// value that is not a whole number is an Error naming the key (never echoing the value's text).
void set_lesson_value(const Lesson& lesson, LessonValues& values, const std::string& assignment);
// lesson_values(), then compute.
LessonResult run_lesson(const Lesson& lesson, const LessonValues& given);

// One object: {"lesson", "title", "inputs": {key: value}, "figures": {key: value},
// "labels": {key: label}, "plot": {"title", "x_label", "y_label", "log_x", "log_y",
// "series": [{"name", "x", "y", "reference"}]}};
// non-finite numbers are null.
nlohmann::json lesson_json(const Lesson& lesson, const LessonValues& values, const LessonResult& result);

// A standard normal draw from the generator's bits alone (Box-Muller on 53-bit uniforms), so that
// a lesson's random weights are the same on every platform and standard library.
double lesson_normal(std::mt19937_64& rng);

// The lessons, one builder each (the files named above).
Lesson accumulate_lesson();
Lesson small_values_lesson();
Lesson checkpointing_lesson();
Lesson quant_outlier_lesson();
Lesson group_quant_lesson();
Lesson distillation_lesson();

}  // namespace trainlab
