// trainlab-cli calibrate: measures the device's roofs (backend/calibration.h: peak matrix-product
// TFLOP/s per precision and the copy bandwidth), prints them and writes the cache that runs read
// for MFU and the roofline. trainlab-cli roofline DIR: the roofline table of a run recorded with
// device.kernel_timing (train/roofline.h), as `train` prints at the end of such a run.
#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "backend/calibration.h"
#include "cli/commands.h"
#include "train/roofline.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab::cli {

Runner add_calibrate_command(CLI::App& app) {
  struct Opts {
    std::string device = "auto", cache_dir;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Measure the device's peak matrix-product FLOP/s per precision and its bandwidth (for MFU and the roofline)");
  cmd->add_option("--device", o->device, "cpu, cuda, cuda:N or auto");
  cmd->add_flag("--force", o->force, "Measure again even when the cache holds a valid calibration");
  cmd->add_option("--cache-dir", o->cache_dir, "Cache folder (default: $XDG_CACHE_HOME/trainlab or ~/.cache/trainlab)");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    std::string notice;
    std::unique_ptr<Backend> be = create_backend(o->device, &notice);
    if (!notice.empty()) std::fprintf(stderr, "%s\n", notice.c_str());
    const Calibration c = calibrate(*be, o->force ? CalibrationMode::Measure : CalibrationMode::Cached, o->cache_dir);
    std::printf("%s", calibration_table(c).c_str());
    return 0;
  };
}

Runner add_roofline_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("roofline", "Print the roofline table of a run recorded with device.kernel_timing");
  cmd->add_option("dir", *dir, "The run's folder")->required()->type_name("DIR");
  return [dir, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const LoadedRun run = load_run(*dir);
    for (const std::string& w : run.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    const std::string precision = Config::from_record(run.config).get_string("precision.dtype");
    std::printf("%s", roofline_table(run_roofline(run.steps, precision)).c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
