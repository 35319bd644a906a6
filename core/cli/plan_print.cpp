#include "cli/plan_print.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "train/plan_check.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {

// 1234567 -> "1,234,567"
std::string grouped(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return v < 0 ? "-" + out : out;
}

double gb(double bytes) { return bytes / 1e9; }
double gib(double bytes) { return bytes / 1073741824.0; }

const MemCategory kRows[] = {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer,
                             MemCategory::Activations, MemCategory::Communication};

int64_t cat(const MemoryByCategory& m, MemCategory c) { return m[static_cast<size_t>(c)]; }

void print_bytes_row(const char* name, double bytes) {
  std::printf("  %-15s %22s %12.3f %12.3f\n", name, grouped(static_cast<int64_t>(bytes)).c_str(), gb(bytes), gib(bytes));
}

std::string model_line(const PlanModel& m) {
  std::string s = m.name + ": " + grouped(m.total_params()) + " parameters";
  if (m.kind == PlanModelKind::Transformer) {
    const CharGptConfig& c = m.transformer;
    char buf[200];
    std::snprintf(buf, sizeof buf, " (%lld layers, hidden %lld, %lld heads, seq %lld, vocab %lld, dropout %g)",
                  static_cast<long long>(c.layers), static_cast<long long>(c.dim), static_cast<long long>(c.heads),
                  static_cast<long long>(c.context), static_cast<long long>(c.padded_vocab()), c.dropout);
    s += buf;
  } else if (m.kind == PlanModelKind::Mlp) {
    s += " (MLP";
    for (size_t i = 0; i < m.mlp_sizes.size(); ++i) s += (i ? "-" : " ") + std::to_string(m.mlp_sizes[i]);
    s += ")";
  }
  return s;
}

void print_header(const PlanSetup& s, const Layout& l) {
  std::printf("model        %s\n", model_line(s.model).c_str());
  std::printf("setup        micro-batch %lld, %s (%lld-byte elements%s), %s (%.4g bytes of state a parameter)\n",
              static_cast<long long>(s.micro_batch), s.precision.c_str(), static_cast<long long>(s.element_bytes),
              s.element_bytes < 4 ? ", fp32 master copy" : "", s.optimizer.c_str(), s.optimizer_state_bytes);
  if (s.offload)
    std::printf("offload      cpu: fp32 masters and optimizer state in host memory (optim.offload cpu), updated on "
                "the CPU; the step time below does not include the transfers\n");
  std::printf("machines     %lld x %s (%.3g GB), %lld node%s; peak %.1f TFLOP/s (%s), MFU %.2f; NVLink %.0f GB/s, "
              "network %.0f GB/s\n",
              static_cast<long long>(s.gpus), s.gpu.c_str(), gb(s.gpu_memory_bytes), static_cast<long long>(s.nodes),
              s.nodes == 1 ? "" : "s", s.peak_flops / 1e12, s.precision.c_str(), s.mfu, gb(s.nvlink_bytes_per_s),
              gb(s.network_bytes_per_s));
  std::printf("layout       DP %lld x TP %lld x PP %lld, ZeRO %d, recompute %s", static_cast<long long>(l.dp),
              static_cast<long long>(l.tp), static_cast<long long>(l.pp), l.zero, recompute_name(l.recompute));
  if (l.recompute == Recompute::Full && l.recompute_every > 1)
    std::printf(" (every %lld layers)", static_cast<long long>(l.recompute_every));
  if (l.sequence_parallel) std::printf(", sequence parallel");
  std::printf(", %lld micro-batch%s a step\n", static_cast<long long>(l.micro_batches), l.micro_batches == 1 ? "" : "es");
  if (s.model.kind == PlanModelKind::Transformer)
    std::printf("activations  counted as %s\n", s.count == ActivationCount::Lab
                                                    ? "lab (TrainLab's own buffers: fused attention, no stored masks)"
                                                    : "megatron (Korthikanti et al. 2022)");
}

}  // namespace

Json plan_json(const PlanSetup& s, const PlanResult& r) {
  Json j = plan_setup_json(s);
  const Json result = plan_result_json(r);
  for (auto it = result.begin(); it != result.end(); ++it) j[it.key()] = it.value();
  return j;
}

void print_plan_table(const PlanSetup& s, const PlanResult& r) {
  print_header(s, r.layout);
  std::printf("\nper GPU (pipeline stage %lld of %lld, the fullest)\n", static_cast<long long>(r.stages[r.worst].index + 1),
              static_cast<long long>(r.stages.size()));
  std::printf("  %-15s %22s %12s %12s\n", "", "bytes", "GB", "GiB");
  for (MemCategory c : kRows) print_bytes_row(mem_category_name(c), static_cast<double>(cat(r.per_gpu, c)));
  print_bytes_row("total", static_cast<double>(r.per_gpu_total));
  if (s.offload)  // not part of the GPU's total
    print_bytes_row("host (offload)", static_cast<double>(cat(r.per_gpu, MemCategory::Host)));
  print_bytes_row("GPU memory", s.gpu_memory_bytes);
  std::printf("  %s: %.1f %% of the GPU's memory\n", r.fits ? "fits" : "DOES NOT FIT",
              100.0 * static_cast<double>(r.per_gpu_total) / s.gpu_memory_bytes);
  if (!r.activations_known)
    std::printf("  activations are not predicted from a parameter count: give the shape (--layers --hidden --heads --seq "
                "--vocab) or --model\n");
  if (r.stages.size() > 1) {
    std::printf("  stages (GB per GPU):");
    for (const StagePlan& st : r.stages)
      std::printf(" %lld: %.3f (%lld layers, %lld in flight)%s", static_cast<long long>(st.index + 1),
                  gb(static_cast<double>(st.total())), static_cast<long long>(st.layers),
                  static_cast<long long>(st.in_flight), &st == &r.stages.back() ? "" : ";");
    std::printf("\n");
  }
  const StepTime& t = r.time;
  std::printf("\ntime per step  %.4g s = compute %.4g + communication %.4g (TP %.4g, PP %.4g, DP %.4g) + bubble %.4g "
              "(%.1f %% idle)\n",
              t.step_s, t.compute_s, t.communication_s(), t.tp_s, t.pp_s, t.dp_s, t.bubble_s, 100.0 * t.bubble_fraction);
  if (r.layout.pp > 1) {
    std::printf("pipeline       %s schedule", dist::pipeline_schedule_name(r.layout.schedule));
    if (r.layout.virtual_stages > 1) std::printf(" (%lld chunks a GPU)", static_cast<long long>(r.layout.virtual_stages));
    std::printf(", %lld stages x %lld micro-batches: bubble %.4g of the step's pipeline time (%.4g s)\n",
                static_cast<long long>(r.layout.pp), static_cast<long long>(r.layout.micro_batches), t.bubble_fraction,
                t.bubble_s);
    if (!r.pipeline_warning.empty()) std::printf("  note: %s\n", r.pipeline_warning.c_str());
  }
  std::printf("throughput     %.4g tokens/s (%s tokens a step); %.4g FLOPs a step (model), %.4g with recomputation\n",
              t.tokens_per_s(), grouped(static_cast<int64_t>(t.tokens)).c_str(), t.model_flops, t.hardware_flops);
  std::printf("sent per GPU   TP %.4g GB, PP %.4g GB, DP %.4g GB a step\n", gb(t.tp_bytes), gb(t.pp_bytes), gb(t.dp_bytes));
}

void print_schedule_table(const Layout& l) {
  if (l.pp * l.micro_batches * l.virtual_stages > 4096)
    throw Error("--print-schedule: --pp " + std::to_string(l.pp) + " x --micro-batches " + std::to_string(l.micro_batches) +
                " x --virtual-stages " + std::to_string(l.virtual_stages) + " is more than 4096 units to print");
  std::printf("\n%s", dist::schedule_text(plan_schedule(l)).c_str());
}

void print_search_table(const PlanSetup& s, const SearchResult& r, int64_t top) {
  std::printf("model        %s\n", model_line(s.model).c_str());
  std::printf("search       %lld layouts of %lld x %s (%.3g GB), %lld node%s, global batch %lld: %zu fit, fastest first\n",
              static_cast<long long>(r.considered), static_cast<long long>(s.gpus), s.gpu.c_str(), gb(s.gpu_memory_bytes),
              static_cast<long long>(s.nodes), s.nodes == 1 ? "" : "s", static_cast<long long>(r.global_batch), r.fit.size());
  if (r.fit.empty()) {
    std::printf("no layout fits: try more GPUs, a smaller --batch, --recompute full or ZeRO 3\n");
    return;
  }
  std::printf("\n rank   DP   TP   PP ZeRO recompute  micro-b   GB/GPU  GiB/GPU    step s  compute     comm   bubble  "
              "tokens/s\n");
  for (size_t i = 0; i < r.fit.size() && static_cast<int64_t>(i) < top; ++i) {
    const PlanResult& p = r.fit[i];
    const Layout& l = p.layout;
    const double bytes = static_cast<double>(p.per_gpu_total);
    std::printf("%5zu %4lld %4lld %4lld %4d %-10s %8lld %8.2f %8.2f %9.4g %8.3g %8.3g %8.3g %9.4g\n", i + 1,
                static_cast<long long>(l.dp), static_cast<long long>(l.tp), static_cast<long long>(l.pp), l.zero,
                recompute_name(l.recompute), static_cast<long long>(l.micro_batches), gb(bytes), gib(bytes), p.time.step_s,
                p.time.compute_s, p.time.communication_s(), p.time.bubble_s, p.time.tokens_per_s());
  }
  if (static_cast<int64_t>(r.fit.size()) > top)
    std::printf("(%zu more: --top N, or --json for all)\n", r.fit.size() - static_cast<size_t>(top));
}

void print_search_json(const PlanSetup& s, const SearchResult& r) {
  Json j = plan_setup_json(s);
  j["global_batch"] = r.global_batch;
  j["considered"] = r.considered;
  j["layouts"] = Json::array();
  for (const PlanResult& p : r.fit) j["layouts"].push_back(plan_result_json(p));
  std::printf("%s\n", j.dump(2).c_str());
}

int run_plan_check(const PlanSetup& s, const PlanResult& r, const std::string& device, const std::string& out,
                   int64_t steps, bool json) {
  namespace fs = std::filesystem;
  std::string dir = out;
  bool temporary = false;
  if (dir.empty()) {
    dir = (fs::temp_directory_path() / ("trainlab-plan-check-" + std::to_string(::getpid()))).string();
    temporary = true;
  }
  PlanCheck c;
  try {
    c = check_plan(s, r.layout, device, dir, static_cast<long>(steps));
  } catch (...) {
    if (temporary) fs::remove_all(dir);
    throw;
  }
  if (temporary) fs::remove_all(dir);
  const MemCategory rows[] = {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer, MemCategory::Activations};
  if (json) {
    Json j = plan_json(s, r);
    Json pj = Json::object(), mj = Json::object();
    for (MemCategory k : rows) {
      pj[std::string(mem_category_name(k)) + "_bytes"] = cat(c.predicted, k);
      mj[std::string(mem_category_name(k)) + "_bytes"] = cat(c.measured, k);
    }
    j["check"] = {{"device", c.device}, {"steps", c.steps},           {"predicted", pj},
                  {"measured", mj},     {"step_s", c.step_s_measured}, {"step_s_predicted", c.step_s_predicted},
                  {"mfu", c.mfu_measured}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  print_header(s, r.layout);
  std::printf("\ncheck on %s, %ld step%s (the lab's own count; the ledger after the last step)\n", c.device.c_str(), c.steps,
              c.steps == 1 ? "" : "s");
  std::printf("  %-15s %18s %18s %10s\n", "", "predicted bytes", "measured bytes", "measured");
  int64_t tp = 0, tm = 0;
  for (MemCategory k : rows) {
    const int64_t p = cat(c.predicted, k), m = cat(c.measured, k);
    tp += p;
    tm += m;
    std::printf("  %-15s %18s %18s %8.2f %%\n", mem_category_name(k), grouped(p).c_str(), grouped(m).c_str(),
                p > 0 ? 100.0 * static_cast<double>(m) / static_cast<double>(p) : 0.0);
  }
  std::printf("  %-15s %18s %18s %8.2f %%\n", "total", grouped(tp).c_str(), grouped(tm).c_str(),
              tp > 0 ? 100.0 * static_cast<double>(tm) / static_cast<double>(tp) : 0.0);
  if (c.step_s_predicted > 0)
    std::printf("  step time: measured %.4g s, predicted %.4g s at MFU %.2f (measured MFU %.3f)\n", c.step_s_measured,
                c.step_s_predicted, s.mfu, c.mfu_measured);
  else
    std::printf("  step time: measured %.4g s (no peak known for this device: no time predicted)\n", c.step_s_measured);
  return 0;
}

}  // namespace trainlab::cli
