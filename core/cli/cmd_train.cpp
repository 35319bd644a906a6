#include <signal.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>
#include <string>

#include "cli/commands.h"
#include "cli/option_ranges.h"
#include "cli/progress.h"
#include "config/config.h"
#include "config/run_defaults.h"
#include "dist/communicator.h"
#include "dist/launch.h"
#include "dist/world.h"
#include "train/run_checkpoint.h"
#include "train/roofline.h"
#include "train/trainer.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {
// The trainer a signal stops. SIGINT (Ctrl+C), SIGTERM (what `timeout`, `kill` and schedulers
// send) and SIGHUP (a closed terminal) all end the run at the next step boundary with status
// "stopped", its weights and record kept; the handler only sets the trainer's lock-free flag.
std::atomic<Trainer*> g_active{nullptr};
void on_stop_signal(int) {
  if (Trainer* t = g_active.load()) t->request_stop();
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // A write past the file size limit (ulimit -f) then fails with EFBIG, which the run record
  // reports (status "failed", the path and the reason), instead of killing the process.
  signal(SIGXFSZ, SIG_IGN);
}

// A summary number, or "no value" for NaN (e.g. the test accuracy of a diverged run).
std::string value_text(double v) {
  if (std::isnan(v)) return "no value";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// The flags as given (not config/train_options.h's TrainOptions: these become Config keys). Each
// numeric flag keeps its text ("" when not given), checked against its key's range while the
// command line is parsed (cli/option_ranges.h) and then set like --set.
struct TrainFlags {
  std::string config_file, model, optimizer, offload, precision, device, out;
  std::string resume;  // --resume DIR
  std::string epochs, steps, batch, accumulate, micro_batches, seed, lr, ranks, gpus, tp;
  std::string pp, schedule, virtual_stages, stage_layers;  // the pipeline's layout
  std::string init_from, finetune, rank, alpha, targets;  // fine-tuning (docs/FINETUNE.md)
  bool sequence_parallel = false;
  std::vector<std::string> sets;
  bool quiet = false;
  bool print_config = false;
  bool overwrite = false;
};

// --tp, --sequence-parallel, --pp, --schedule, --virtual-stages and --stage-layers (dist.tp,
// dist.sequence_parallel, dist.pp, ...): a new run's layout, or the one a resumed run continues at.
void set_layout(Config& c, const TrainFlags& o) {
  if (!o.tp.empty()) c.set("dist.tp", o.tp);
  if (o.sequence_parallel) c.set("dist.sequence_parallel", "true");
  const std::pair<const char*, const std::string*> keys[] = {{"dist.pp", &o.pp},
                                                             {"dist.schedule", &o.schedule},
                                                             {"dist.virtual_stages", &o.virtual_stages},
                                                             {"dist.stage_layers", &o.stage_layers}};
  for (const auto& [key, text] : keys)
    if (!text->empty()) c.set(key, *text);
}

// The config file (or the defaults), then the flags and --set. A flag or --set that switches the
// model or the optimizer brings its defaults (config/run_defaults.h) to the keys not given here.
Config build_config(const TrainFlags& o) {
  const Config base = o.config_file.empty() ? Config() : Config::from_file(o.config_file);
  Config c = base;
  std::set<std::string> chosen;
  const std::pair<const char*, const std::string*> flags[] = {
      {"model.name", &o.model},          {"train.epochs", &o.epochs}, {"train.steps", &o.steps},
      {"train.batch", &o.batch},         {"train.accumulate", &o.accumulate}, {"train.seed", &o.seed},
      {"train.micro_batches", &o.micro_batches},
      {"optim.lr", &o.lr},               {"optim.name", &o.optimizer}, {"precision.dtype", &o.precision},
      {"optim.offload", &o.offload},     {"compress.init_from", &o.init_from},
      {"finetune.method", &o.finetune},  {"finetune.rank", &o.rank},   {"finetune.alpha", &o.alpha},
      {"finetune.targets", &o.targets},
      {"device.name", &o.device},        {"run.out", &o.out}};
  for (const auto& [key, text] : flags)
    if (!text->empty()) {
      c.set(key, *text);
      chosen.insert(key);
    }
  if (!o.ranks.empty() && !o.gpus.empty())
    throw Error("--ranks and --gpus both given: --gpus N is --ranks N with one GPU a rank");
  if (!o.ranks.empty()) c.set("dist.ranks", o.ranks);
  if (!o.gpus.empty()) {
    c.set("dist.ranks", o.gpus);
    c.set("device.name", "cuda");
  }
  set_layout(c, o);
  apply_sets(c, o.sets);
  for (const std::string& s : o.sets) chosen.insert(s.substr(0, s.find('=')));
  apply_switch_defaults(c, base, chosen);
  return c;
}

// An error of a run over several ranks: printed (rank 0 alone for one every rank found alike),
// then the whole job ends, so that no rank waits for this one until its timeout.
int end_job_after(const std::exception& e, const dist::LaunchInfo& place) {
  const bool collective = dynamic_cast<const dist::CollectiveError*>(&e) != nullptr;
  if (place.rank == 0 || !collective)
    std::fprintf(stderr, "\nerror: %s%s\n", place.rank == 0 ? "" : ("rank " + std::to_string(place.rank) + ": ").c_str(),
                 e.what());
  // Rank 0 reports an error every rank found; the others give it time to print before any abort.
  if (collective && place.rank != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  dist::abort_job(1);
  return 1;
}

// What rank 0 prints once the run has ended; the exit code of the run.
int report_summary(const RunSummary& s, double last_scale, bool root, const std::string& unit) {
  if (root) {
    std::fprintf(stderr, "%s: %ld steps, %.2f epochs, train loss %s, test accuracy %s, test loss %s, %.0f %s, %.2f s\n",
                 s.status.c_str(), s.steps, s.epochs, value_text(s.final_train_loss).c_str(),
                 value_text(s.test_accuracy).c_str(), value_text(s.test_loss).c_str(), s.samples_per_s, unit.c_str(),
                 s.wall_s);
    if (s.ranks > 1) std::fprintf(stderr, "%s\n", s.dist_layout.c_str());
    if (s.precision == "fp16")
      std::fprintf(stderr, "fp16 loss scaling: scale %g at the end, %ld skipped steps\n", last_scale, s.skipped_steps);
    std::fprintf(stderr, "run record: %s\n", s.run_dir.c_str());
  }
  if (s.status == "diverged") {
    if (root) std::fprintf(stderr, "error: %s; the run record keeps every step so far\n", s.message.c_str());
    return 3;
  }
  if (s.status == "failed") {
    std::fprintf(stderr, "error: %s\n", s.message.c_str());
    return 1;
  }
  if (s.status == "stopped") {
    std::optional<RunCheckpointInfo> ck;
    try {
      if (root) ck = read_run_checkpoint(s.run_dir);
    } catch (const Error&) {
    }
    if (ck)
      std::fprintf(stderr, "checkpoint at step %ld: continue with trainlab-cli train --resume %s\n", ck->progress.step,
                   s.run_dir.c_str());
    return 130;
  }
  return 0;
}

// The roofline table of a run with kernel timing (train/roofline.h), or why there is none.
void print_run_roofline(const std::vector<StepMetrics>& steps, const std::string& precision) {
  try {
    std::fprintf(stderr, "%s", roofline_table(run_roofline(steps, precision)).c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "no roofline: %s\n", e.what());
  }
}

// Trains with `c` (continuing the run in flags.resume when set) and prints the summary (rank 0
// alone in a run over several ranks).
int run_training(const Config& c, const TrainFlags& flags, const dist::LaunchInfo& place) {
  const bool root = place.rank == 0;
  // What samples_per_s counts: tokens for the character transformer (as the window labels it).
  const std::string unit = c.get_string("model.name") == "char-gpt" ? "tokens/s" : "samples/s";
  Progress progress(flags.quiet || !root, unit);
  TrainerCallbacks cb;
  double last_scale = 1.0;
  std::vector<StepMetrics> timed;  // steps with kernel times or roofs, for the roofline table
  cb.on_step = [&](const StepMetrics& m) {
    progress.update(m);
    last_scale = m.loss_scale;
    if (!m.kernel_times.empty() || m.roofline) timed.push_back(m);
  };
  cb.on_notice = [&](const std::string& s) {
    if (root) progress.notice(s);
  };
  Trainer trainer(c, cb, flags.resume);
  trainer.set_open_mode(flags.overwrite ? RunOpenMode::Overwrite : RunOpenMode::New);
  g_active = &trainer;
  install_stop_handlers();
  RunSummary s;
  try {
    s = trainer.run();
  } catch (...) {
    g_active = nullptr;
    progress.finish();
    throw;
  }
  g_active = nullptr;
  progress.finish();
  const int code = report_summary(s, last_scale, root, unit);
  if (root && c.get_bool("device.kernel_timing")) print_run_roofline(timed, c.get_string("precision.dtype"));
  return code;
}

// The flags that set how a run computes: refused with --resume (the run keeps its own settings).
const char* const kSettingFlags[] = {"--config",    "--model",     "--epochs",     "--steps", "--batch",  "--lr",
                                     "--optimizer", "--precision", "--accumulate", "--seed",  "--device", "--out",
                                     "--overwrite", "--offload", "--micro-batches"};

std::string settable_on_resume() {
  std::string keys;
  for (const auto& k : resume_settable_keys()) keys += (keys.empty() ? "" : ", ") + k;
  return keys;
}

// The config of `train --resume DIR`: the run's own, with --set applied to the keys that may change.
Config resume_train_config(const TrainFlags& o, const CLI::App& cmd) {
  if (o.resume.empty()) throw Error("--resume: expected a run folder (DIR), got an empty name");
  for (const char* flag : kSettingFlags)
    if (cmd.get_option(flag)->count() > 0)
      throw Error(std::string(flag) + " cannot be given with --resume: the run continues with the settings in " +
                  o.resume + "/config.json (only --set " + settable_on_resume() + " may change)");
  const Config base = resume_config(o.resume);
  Config c = base;
  apply_sets(c, o.sets);
  if (!o.ranks.empty() && !o.gpus.empty())
    throw Error("--ranks and --gpus both given: --gpus N is --ranks N with one GPU a rank");
  if (!o.ranks.empty()) c.set("dist.ranks", o.ranks);  // resharded on resume
  if (!o.gpus.empty()) {  // the run's device stays: --gpus only names the ranks of a GPU run
    const std::string device = base.get_string("device.name");
    if (device.rfind("cuda", 0) != 0)
      throw Error("--gpus " + o.gpus + " with --resume: " + o.resume + " trained on device '" + device +
                  "', and a resumed run keeps its device (use --ranks " + o.gpus + ")");
    c.set("dist.ranks", o.gpus);
  }
  set_layout(c, o);
  check_resume_overrides(base, c);
  return c;
}

}  // namespace

Runner add_train_command(CLI::App& app, std::vector<std::string> args) {
  auto o = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model and write a run record (config, metrics, summary, weights)");
  cmd->add_option("--config", o->config_file, "JSON config file (the same files the app saves as presets)");
  cmd->add_option("--model", o->model, "Model: digits-mlp, mlp or char-gpt (model.name); a model other than the config's brings its own run length, batch, learning rate, evaluation interval, data set and run name, except the keys given here");
  add_key_option(cmd, "--epochs", o->epochs, "train.epochs", "Epochs");
  add_key_option(cmd, "--steps", o->steps, "train.steps", "Optimizer steps; overrides epochs");
  add_key_option(cmd, "--batch", o->batch, "train.batch", "Samples per micro-batch");
  add_key_option(cmd, "--lr", o->lr, "optim.lr", "Learning rate");
  cmd->add_option("--optimizer", o->optimizer, "adamw, sgd, adamw8bit, adafactor or lion (optim.name); another optimizer than the config's brings its customary rate, betas and weight decay (Lion: a tenth of AdamW's rate), except the keys given here");
  cmd->add_option("--offload", o->offload,
                  "none or cpu: cpu keeps the fp32 masters and optimizer state in host memory and updates them on the "
                  "CPU (optim.offload)");
  cmd->add_option("--precision", o->precision, "fp32, tf32, bf16, fp16 or fp8 (precision.dtype)");
  add_key_option(cmd, "--accumulate", o->accumulate, "train.accumulate", "Gradient accumulation: micro-batches per step");
  add_key_option(cmd, "--micro-batches", o->micro_batches, "train.micro_batches",
                 "Micro-batches per optimizer step, m (--accumulate under the pipeline's name; give one of the two)");
  add_key_option(cmd, "--seed", o->seed, "train.seed", "Seed");
  cmd->add_option("--device", o->device, "cpu, cuda, cuda:N or auto (device.name)");
  cmd->add_option("--set", o->sets, "Any config key: --set key=value (repeatable), e.g. --set data.path=FILE");
  cmd->add_option("--out", o->out, "Run record folder (run.out)");
  cmd->add_option("--init-from", o->init_from,
                  "Start from trained weights: a run folder (its model.safetensors) or a weights file "
                  "(compress.init_from); a text model keeps their vocabulary and must have their shape");
  cmd->add_option("--finetune", o->finetune,
                  "full, lora, qlora or dora (finetune.method): how --init-from's weights are adapted");
  add_key_option(cmd, "--rank", o->rank, "finetune.rank", "Adapter rank r");
  add_key_option(cmd, "--alpha", o->alpha, "finetune.alpha", "Adapter scale numerator: alpha / r");
  cmd->add_option("--targets", o->targets,
                  "Products the adapters wrap, comma-separated: qkv, proj, fc1, fc2, head (finetune.targets)");
  add_key_option(cmd, "--ranks", o->ranks, "dist.ranks",
                 "Train on N ranks of this machine, started through mpirun (dist.strategy says how)");
  add_key_option(cmd, "--gpus", o->gpus, "dist.ranks", "Train on N GPUs of this machine, one rank each (--ranks N with device cuda)");
  add_key_option(cmd, "--tp", o->tp, "dist.tp",
                 "Tensor-parallel degree: char-gpt's blocks split over groups of T adjacent ranks (--ranks N: N/T "
                 "data-parallel replicas)");
  cmd->add_flag("--sequence-parallel", o->sequence_parallel,
                "With --tp: LayerNorm, dropout and the residual stream on 1/T of the tokens per rank "
                "(dist.sequence_parallel)");
  add_key_option(cmd, "--pp", o->pp, "dist.pp",
                 "Pipeline-parallel degree: char-gpt's blocks split into P consecutive stages on P ranks (--ranks N: "
                 "N/(T P) data-parallel replicas)");
  cmd->add_option("--schedule", o->schedule, "Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1 (dist.schedule)");
  add_key_option(cmd, "--virtual-stages", o->virtual_stages, "dist.virtual_stages",
                 "Model chunks per pipeline rank (--schedule interleaved)");
  cmd->add_option("--stage-layers", o->stage_layers,
                  "Blocks of each pipeline stage, e.g. 3,1 (dist.stage_layers; default balanced)");
  cmd->add_option("--resume", o->resume,
                  "Continue the run in DIR from its last checkpoint (it needs run.checkpoint_every > 0), after a "
                  "stop, a crash or kill -9: the run keeps its own config.json, so --config and the other setting "
                  "flags are refused, and --set only takes the keys that do not change the run's numbers: " +
                      settable_on_resume() +
                      "; --ranks N, --tp T and --set dist.* continue it at another number of ranks, tensor-parallel "
                      "degree or strategy (resharded)")
      ->type_name("DIR");
  cmd->add_flag("--overwrite", o->overwrite,
                "Replace the run record in --out (a finished or interrupted run's; a folder with files a run did not "
                "write is still refused)");
  cmd->add_flag("--quiet", o->quiet, "No progress output");
  cmd->add_flag("--print-config", o->print_config, "Print the resolved config as JSON and exit");
  // The device.* keys have no flag of their own: --help lists them from the schema.
  std::string device_keys = "Device keys (--set KEY=VALUE):";
  for (const ConfigKey& k : config_schema())
    if (k.key.rfind("device.", 0) == 0 && k.key != "device.name")
      device_keys += "\n  " + k.key + " (" + describe_expected(k) + "; default " + k.default_value.dump() + "): " + k.help;
  cmd->footer(device_keys);
  return [o, cmd, args]() -> int {
    if (!cmd->parsed()) return -1;
    const dist::LaunchInfo place = dist::launch_info();
    const bool resuming = cmd->get_option("--resume")->count() > 0;
    Config c = resuming ? resume_train_config(*o, *cmd) : build_config(*o);
    if (o->print_config) {
      std::printf("%s\n", c.to_json().dump(2).c_str());
      return 0;
    }
    const int ranks = static_cast<int>(c.get_int("dist.ranks"));
    if (!place.launched() && ranks > 1)  // the same command once per rank, through mpirun
      dist::exec_mpirun(dist::mpirun_argv(ranks, dist::self_executable(), args, geteuid() == 0));
    if (place.size > 1) {
      try {
        return run_training(c, *o, place);
      } catch (const std::exception& e) {
        return end_job_after(e, place);
      }
    }
    return run_training(c, *o, place);
  };
}

}  // namespace trainlab::cli
