// trainlab-cli lesson: a worked example computed by the lab's own code (lessons/lesson.h), the
// same figures the app's Lessons view shows.
//
//   trainlab-cli lesson --list
//   trainlab-cli lesson accumulate --set n=20000 --set value=1e-4 [--json]
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "lessons/lesson.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {

struct LessonArgs {
  std::string name;
  std::vector<std::string> sets;
  bool list = false;
  bool json = false;
};

void print_list() {
  for (const Lesson& l : lesson_registry()) {
    std::printf("%-14s %s\n", l.name.c_str(), l.title.c_str());
    for (const LessonInput& in : l.inputs)
      std::printf("    %-12s %-24s default %-8g range [%g, %g]%s\n", in.key.c_str(), in.label.c_str(), in.def, in.lo, in.hi,
                  in.integer ? " integer" : "");
  }
}

void print_text(const Lesson& l, const LessonValues& values, const LessonResult& r) {
  std::printf("%s\n\n%s\n\ninputs:\n", l.title.c_str(), l.text.c_str());
  for (const LessonInput& in : l.inputs)
    std::printf("  %-12s %-28s %.9g\n", in.key.c_str(), in.label.c_str(), values.at(in.key));
  std::printf("\nfigures:\n");
  for (const LessonFigure& f : r.figures) {
    if (std::isnan(f.value))  // no value (e.g. where a format never stalls), as the Lessons view shows it
      std::printf("  %-32s %-62s none\n", f.key.c_str(), f.label.c_str());
    else
      std::printf("  %-32s %-62s %.9g\n", f.key.c_str(), f.label.c_str(), f.value);
  }
}

}  // namespace

Runner add_lesson_command(CLI::App& app) {
  auto a = std::make_shared<LessonArgs>();
  CLI::App* cmd = app.add_subcommand("lesson", "A textbook worked example (accumulate, small-values, checkpointing, "
                                               "quant-outlier, group-quant, distillation) computed by the lab's core");
  cmd->add_option("name", a->name, "The lesson (--list names them)");
  cmd->add_flag("--list", a->list, "List the lessons with their inputs, defaults and ranges");
  cmd->add_option("--set", a->sets, "An input: --set key=value (repeatable; --list names the keys)");
  cmd->add_flag("--json", a->json, "Print one JSON object: the inputs, every figure and the plot's series");
  return [a, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    if (a->list) {
      print_list();
      return 0;
    }
    if (a->name.empty()) throw Error("lesson: name a lesson (trainlab-cli lesson --list names them)");
    const Lesson& lesson = find_lesson(a->name);
    LessonValues values;
    for (const auto& s : a->sets) set_lesson_value(lesson, values, s);
    values = lesson_values(lesson, values);
    const LessonResult r = lesson.compute(values);
    if (a->json)
      std::printf("%s\n", lesson_json(lesson, values, r).dump(2).c_str());
    else
      print_text(lesson, values, r);
    return 0;
  };
}

}  // namespace trainlab::cli
