// trainlab-cli bench: the benchmark cases of ../shared/bench (the PyTorch peer), same work, JSON
// lines out. A benchmark, not a test: BENCHMARKS.md records its ratios against the peer. The
// cases are library functions (train/benchmark.h; decode: decode/decode_bench.h); this file parses
// the options, picks the defaults per device and prints one line per case and mode (an error as
// {"case", "mode", "error"}).
#include <cstdio>
#include <functional>
#include <memory>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "decode/decode_bench.h"
#include "cli/commands.h"
#include "cli/option_ranges.h"
#include "train/benchmark.h"
#include "util/error.h"

namespace trainlab::cli {

using Json = nlohmann::json;

namespace {

void print_line(const Json& r) {
  std::printf("%s\n", r.dump().c_str());
  std::fflush(stdout);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  struct Opts {
    std::string cases = "digits", device = "auto", modes, weights, preset = "small", batch = "1";
    long steps = 0, warmup = 0, epochs = 30;  // steps 0: the case's default; warmup: its default unless given
    int ranks = 2;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark cases matching the PyTorch peer; prints one JSON object per case and mode");
  cmd->add_option("--case", o->cases, "Comma-separated: digits (training step, batch 128), digits-train (30 epochs, batch 64), "
                                      "char-tiny|char-small|char-gpt2, decode (generation per weight format; --modes fp32,bf16,int8,int4-g32), "
                                      "scaling (digits at 1 rank and at --ranks N, same global batch; --modes ddp,zero1,zero2,zero3), "
                                      "optim (the optimizer step alone on --preset's parameters, default gpt2, bf16 mixed "
                                      "precision; --modes adamw,adamw8bit,lion,lion-bf16,adafactor,sgd; 20 steps)");
  cmd->add_option("--device", o->device, "cpu, cuda, cuda:N or auto");
  cmd->add_option("--modes", o->modes, "Comma-separated modes (digits: fp32,tf32,bf16,fp16,fp8, add -nograph to skip CUDA graphs; "
                                       "digits-train: precisions; char-*: fp32,tf32,bf16,fp16, add -ckpt for checkpointing "
                                       "and -offload for optim.offload cpu, e.g. bf16-offload)");
  // The ranges of bench's numbers: timed steps (decode: tokens) and untimed warm-up steps are
  // counts a benchmark can finish; epochs as train.epochs, at least one.
  cmd->add_option("--steps", o->steps, "Timed steps (default 300 on the CPU, 3000 on a GPU; decode: tokens, default 200)")
      ->check(in_range(integers(1, 1e7)));
  cmd->add_option("--warmup", o->warmup, "Untimed warm-up steps (default 50 for digits; char: 5 on the CPU, 10 on a GPU)")
      ->check(in_range(integers(0, 1e6)));
  cmd->add_option("--ranks", o->ranks, "scaling: the ranks to compare with one (default 2)")->check(in_range(integers(2, 1024)));
  cmd->add_option("--epochs", o->epochs, "Epochs for digits-train")->check(in_range(integers(1, 1e4)));
  cmd->add_option("--weights", o->weights, "decode: a char-gpt weights file (fp32 or quantized) instead of a random --preset");
  cmd->add_option("--preset", o->preset,
                  "decode: the random-initialised char-gpt without --weights (tiny, small, gpt2, or xl: 24 x 2048, 1.2 B "
                  "parameters); optim: the model whose parameters are updated (default gpt2)");
  cmd->add_option("--batch", o->batch,
                  "decode: comma-separated batch sizes, sequences decoded side by side with each weight read once a "
                  "step for all of them (1..16; default 1), e.g. 1,4,16");
  const CLI::Option* warmup_given = cmd->get_option("--warmup");
  const CLI::Option* preset_given = cmd->get_option("--preset");
  return [o, cmd, warmup_given, preset_given]() -> int {
    if (!cmd->parsed()) return -1;
    int failures = 0;
    // One line per mode: the case's JSON, or {"case", "mode", "error"} when it throws.
    auto each_mode = [&](const std::string& cs, const std::string& default_modes,
                         const std::function<Json(const std::string&)>& run_mode) {
      for (const auto& mode : split_list(o->modes.empty() ? default_modes : o->modes)) {
        Json r;
        try {
          r = run_mode(mode);
        } catch (const Error& e) {
          r = {{"case", cs}, {"mode", mode}, {"error", e.what()}};
          ++failures;
        }
        print_line(r);
      }
    };
    for (const auto& cs : split_list(o->cases)) {
      if (cs == "digits") {
        each_mode(cs, "fp32,bf16", [&](const std::string& mode) {
          const bool gpu = o->device != "cpu" && !available_devices().empty() && available_devices().size() > 1;
          return bench_digits_step(o->device, mode, o->steps ? o->steps : (gpu ? 3000 : 300), *warmup_given ? o->warmup : 50);
        });
      } else if (cs == "digits-train") {
        each_mode(cs, "fp32", [&](const std::string& mode) { return bench_digits_train(o->device, mode, o->epochs); });
      } else if (cs == "char-tiny" || cs == "char-small" || cs == "char-gpt2") {
        each_mode(cs, "fp32,fp32-ckpt", [&](const std::string& mode) {
          const bool gpu = o->device != "cpu" && available_devices().size() > 1;
          return bench_char_step(o->device, cs, mode, o->steps ? o->steps : 30, *warmup_given ? o->warmup : (gpu ? 10 : 5));
        });
      } else if (cs == "scaling") {
        each_mode(cs, "ddp", [&](const std::string& mode) {
          return bench_scaling(o->device, mode, o->ranks, o->steps ? o->steps : 20);
        });
      } else if (cs == "optim") {  // the optimizer step alone over --preset's parameters (default gpt2 here)
        each_mode(cs, "adamw,adamw8bit,lion,lion-bf16,adafactor", [&](const std::string& mode) {
          const std::string preset = *preset_given ? o->preset : "gpt2";
          return bench_optim_step(o->device, preset, mode, o->steps ? o->steps : 20, *warmup_given ? o->warmup : 3);
        });
      } else if (cs == "decode") {  // token-by-token generation per weight format: cmd_generate.cpp
        std::vector<int64_t> batches;
        for (const std::string& b : split_list(o->batch)) {
          size_t used = 0;
          long long v = 0;
          try {
            v = std::stoll(b, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used != b.size()) throw Error("--batch '" + o->batch + "': expected comma-separated integers 1..16, e.g. 1,4,16");
          batches.push_back(v);
        }
        if (batches.empty()) throw Error("--batch '" + o->batch + "': expected comma-separated integers 1..16, e.g. 1,4,16");
        bench_decode(o->device, o->weights, o->preset, o->modes, o->steps ? o->steps : 200, 1, [&](const Json& r) {
          failures += r.contains("error");
          print_line(r);  // as each format finishes (xl takes seconds a format to prepare)
        }, batches);
      } else {
        throw Error("unknown benchmark case '" + cs +
                    "': expected digits, digits-train, char-tiny, char-small, char-gpt2, decode, scaling or optim");
      }
    }
    return failures ? 1 : 0;
  };
}

}  // namespace trainlab::cli
