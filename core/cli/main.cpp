// trainlab-cli: everything the app does, headless, from a JSON config and flags.
//
// Every failure ends in one line "error: ..." on stderr and a non-zero exit: a usage error
// (CLI11's, with an option's range from cli/option_ranges.h) exits with CLI11's code, anything a
// verb throws with 1. No library's raw text is printed: an exception that is not a trainlab::Error
// is described by describe_exception (util/error.h), e.g. "out of memory while training (...)".
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "cli/commands.h"
#include "util/error.h"

#ifndef TRAINLAB_VERSION
#define TRAINLAB_VERSION "0.0.0"
#endif

namespace trainlab::cli {

void apply_sets(Config& config, const std::vector<std::string>& sets) {
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw Error("--set " + s + ": expected key=value, e.g. --set train.batch=128");
    config.set(s.substr(0, eq), s.substr(eq + 1));
  }
}

namespace {

// What a verb is doing, for "out of memory while ..." and "unexpected error while ...".
std::string doing_of(const CLI::App& app) {
  static const std::pair<const char*, const char*> kDoing[] = {
      {"train", "training"},   {"eval", "evaluating the weights"}, {"bench", "benchmarking"},
      {"generate", "generating text"}, {"quantize", "quantizing the weights"}, {"prune", "pruning the weights"},
      {"sweep", "running the compression sweep"}, {"plan", "planning"}};
  for (const CLI::App* sub : app.get_subcommands())
    for (const auto& [verb, doing] : kDoing)
      if (sub->get_name() == verb) return doing;
  return "running trainlab-cli";
}

}  // namespace

}  // namespace trainlab::cli

int main(int argc, char** argv) {
  CLI::App app{"TrainLab: train, compress and measure neural networks on the CPU or a GPU"};
  app.set_version_flag("--version", std::string("trainlab-cli ") + TRAINLAB_VERSION +
                                         (trainlab::built_with_cuda() ? " (CUDA backend built in)" : " (CPU only)"));
  app.require_subcommand(1);
  // Usage errors as one "error:" line, like every other failure.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\n(--help after a verb lists its options and their ranges)\n";
  });
  std::vector<trainlab::cli::Runner> runners;
  runners.push_back(trainlab::cli::add_train_command(app, std::vector<std::string>(argv + 1, argv + argc)));
  runners.push_back(trainlab::cli::add_eval_command(app));
  runners.push_back(trainlab::cli::add_bench_command(app));
  runners.push_back(trainlab::cli::add_generate_command(app));
  runners.push_back(trainlab::cli::add_quantize_command(app));
  runners.push_back(trainlab::cli::add_prune_command(app));
  runners.push_back(trainlab::cli::add_sweep_command(app));
  runners.push_back(trainlab::cli::add_sensitivity_command(app));
  runners.push_back(trainlab::cli::add_allocate_command(app));
  runners.push_back(trainlab::cli::add_plan_command(app));
  runners.push_back(trainlab::cli::add_lesson_command(app));
  runners.push_back(trainlab::cli::add_calibrate_command(app));
  runners.push_back(trainlab::cli::add_roofline_command(app));
  runners.push_back(trainlab::cli::add_merge_command(app));
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
    std::string verbs;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      verbs += (verbs.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "error: unknown verb '%s'; the verbs are %s (trainlab-cli --help)\n", argv[1], verbs.c_str());
      return static_cast<int>(CLI::ExitCodes::ExtrasError);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& r : runners) {
      const int rc = r();
      if (rc >= 0) return rc;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nerror: %s\n", trainlab::describe_exception(e, trainlab::cli::doing_of(app)).c_str());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "\nerror: unexpected failure while %s\n", trainlab::cli::doing_of(app).c_str());
    return 1;
  }
  return 1;
}
