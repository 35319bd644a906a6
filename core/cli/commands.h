// trainlab-cli verbs. Each registers its subcommand and options on the CLI11 app and returns the
// function that runs it (returning the process exit code).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace trainlab::cli {

using Runner = std::function<int()>;

Runner add_train_command(CLI::App& app);
Runner add_eval_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_generate_command(CLI::App& app);  // char-gpt text generation (issue 4): cmd_generate.cpp

}  // namespace trainlab::cli
