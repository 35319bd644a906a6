// trainlab-cli: everything the app does, headless, from a JSON config and flags.
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
    if (eq == std::string::npos) throw Error("--set " + s + ": expected key=value");
    config.set(s.substr(0, eq), s.substr(eq + 1));
  }
}

}  // namespace trainlab::cli

int main(int argc, char** argv) {
  CLI::App app{"TrainLab: train, compress and measure neural networks on the CPU or a GPU"};
  app.set_version_flag("--version", std::string("trainlab-cli ") + TRAINLAB_VERSION +
                                         (trainlab::built_with_cuda() ? " (CUDA backend built in)" : " (CPU only)"));
  app.require_subcommand(1);
  std::vector<trainlab::cli::Runner> runners;
  runners.push_back(trainlab::cli::add_train_command(app, std::vector<std::string>(argv + 1, argv + argc)));
  runners.push_back(trainlab::cli::add_eval_command(app));
  runners.push_back(trainlab::cli::add_bench_command(app));
  runners.push_back(trainlab::cli::add_generate_command(app));
  runners.push_back(trainlab::cli::add_quantize_command(app));
  runners.push_back(trainlab::cli::add_prune_command(app));
  runners.push_back(trainlab::cli::add_sweep_command(app));
  runners.push_back(trainlab::cli::add_plan_command(app));
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
  } catch (const trainlab::Error& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 1;
  }
  return 1;
}
