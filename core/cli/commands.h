// trainlab-cli verbs. Each registers its subcommand and options on the CLI11 app and returns the
// function that runs it (returning the process exit code).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"

namespace trainlab::cli {

using Runner = std::function<int()>;

// Applies --set key=value options in order (Config::set); throws Error naming an item without '='.
void apply_sets(Config& config, const std::vector<std::string>& sets);

// `args`: the command line after the program name (--ranks N runs it again through mpirun).
Runner add_train_command(CLI::App& app, std::vector<std::string> args);
Runner add_eval_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_generate_command(CLI::App& app);  // char-gpt text generation (issue 4): cmd_generate.cpp
Runner add_quantize_command(CLI::App& app);  // compression (issue 5): cmd_quantize.cpp
Runner add_prune_command(CLI::App& app);
Runner add_sweep_command(CLI::App& app);     // cmd_sweep.cpp
Runner add_sensitivity_command(CLI::App& app);  // issue 20: cmd_sensitivity.cpp
Runner add_allocate_command(CLI::App& app);
Runner add_plan_command(CLI::App& app);      // the planner (issue 18): cmd_plan.cpp
Runner add_lesson_command(CLI::App& app);    // worked examples (issue 22): cmd_lesson.cpp
Runner add_calibrate_command(CLI::App& app); // the measured roofs (issue 19): cmd_calibrate.cpp
Runner add_roofline_command(CLI::App& app);
Runner add_merge_command(CLI::App& app);     // fine-tuning's adapters folded in (issue 40): cmd_merge.cpp

}  // namespace trainlab::cli
