#include "dist/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <sstream>

#include "util/error.h"

namespace trainlab::dist {

namespace {

constexpr int64_t kMaxPipe = int64_t{1} << 20;
constexpr int64_t kMaxActions = int64_t{1} << 24;  // units a table lists (p m v)

PipeAction act(int s, PipeOp op, int i, int c = 0) { return PipeAction{s, op, i, c}; }

bool is_backward(PipeOp op) { return op == PipeOp::Backward || op == PipeOp::BackwardInput; }

// 1F1B's order (Megatron's forward_backward_pipelining_without_interleaving) with `bop` as the
// backward: w forwards, m - w (forward, backward) pairs, w backwards.
std::vector<PipeAction> one_f_one_b(int s, int p, int m, PipeOp bop) {
  const int w = std::min(p - s - 1, m);
  std::vector<PipeAction> out;
  for (int i = 0; i < w; ++i) out.push_back(act(s, PipeOp::Forward, i));
  for (int j = 0; j < m - w; ++j) {
    out.push_back(act(s, PipeOp::Forward, w + j));
    out.push_back(act(s, bop, j));
  }
  for (int j = m - w; j < m; ++j) out.push_back(act(s, bop, j));
  return out;
}

// ZB-H1: 1F1B's F and B, with stage s running the W of micro-batch j once more than s W passes
// are pending, the rest at the end. The first stage does its W right after its B; the last keeps
// p - 1 pending, so its B passes (the critical path, which runs back through every stage) go out
// without waiting for W, and the deferred W passes fill its tail, where 1F1B's last stage idles.
// (A search over the lags 0..p for each stage, p in {2, 4}, m in {4, 8, 16}, finds none shorter;
// the tests check the makespan 3 m + p - 1 at F = B = W = 1.) A FIFO keeps the W passes ascending.
std::vector<PipeAction> zb_h1(int s, int p, int m) {
  std::vector<PipeAction> out;
  std::deque<int> pending;
  for (const PipeAction& a : one_f_one_b(s, p, m, PipeOp::BackwardInput)) {
    out.push_back(a);
    if (a.op != PipeOp::BackwardInput) continue;
    pending.push_back(a.micro_batch);
    if (static_cast<int>(pending.size()) > s) {
      out.push_back(act(s, PipeOp::BackwardWeight, pending.front()));
      pending.pop_front();
    }
  }
  for (int j : pending) out.push_back(act(s, PipeOp::BackwardWeight, j));
  return out;
}

// Megatron's interleaved schedule for rank s: m v units, forward unit u of chunk
// (u mod p v) / p and micro-batch (u / p v) p + u mod p; backward units with the chunks reversed.
std::vector<PipeAction> interleaved(int s, int p, int m, int v) {
  const int total = m * v;
  auto unit = [&](int u, bool forward) {
    const int group = u % (p * v), c = group / p;
    const int i = (u / (p * v)) * p + u % p;
    return act(s, forward ? PipeOp::Forward : PipeOp::Backward, i, forward ? c : v - 1 - c);
  };
  const int warmup = m == p ? total : std::min(total, (p - s - 1) * 2 + (v - 1) * p);
  std::vector<PipeAction> out;
  for (int u = 0; u < warmup; ++u) out.push_back(unit(u, true));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(unit(warmup + k, true));
    out.push_back(unit(k, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(unit(k, false));
  return out;
}

}  // namespace

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::GPipe: return "gpipe";
    case PipelineSchedule::OneFOneB: return "1f1b";
    case PipelineSchedule::Interleaved: return "interleaved";
    case PipelineSchedule::ZbH1: return "zb-h1";
  }
  return "?";
}

PipelineSchedule pipeline_schedule_from_name(const std::string& name, const std::string& what) {
  for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved,
                             PipelineSchedule::ZbH1})
    if (name == pipeline_schedule_name(s)) return s;
  throw Error(what + " '" + name + "': expected gpipe, 1f1b, interleaved or zb-h1");
}

const char* pipe_op_letter(PipeOp op) {
  switch (op) {
    case PipeOp::Forward: return "F";
    case PipeOp::Backward:
    case PipeOp::BackwardInput: return "B";
    case PipeOp::BackwardWeight: return "W";
  }
  return "?";
}

int PipelineTable::sends_to(const PipeAction& a) const {
  const int k = virtual_stage(a), last = virtual_stages() - 1;
  if (a.op == PipeOp::Forward) return k == last ? -1 : (k + 1) % stages;
  if (is_backward(a.op)) return k == 0 ? -1 : (k - 1) % stages;
  return -1;
}

int PipelineTable::receives_from(const PipeAction& a) const {
  const int k = virtual_stage(a), last = virtual_stages() - 1;
  if (a.op == PipeOp::Forward) return k == 0 ? -1 : (k - 1) % stages;
  if (is_backward(a.op)) return k == last ? -1 : (k + 1) % stages;
  return -1;
}

void validate_pipeline(PipelineSchedule kind, int64_t p, int64_t m, int64_t v) {
  auto need = [](const char* what, int64_t x) {
    if (x < 1 || x > kMaxPipe)
      throw Error(std::string(what) + " " + std::to_string(x) + ": expected an integer in [1, " +
                  std::to_string(kMaxPipe) + "]");
  };
  need("pipeline stages", p);
  need("micro-batches", m);
  need("virtual stages", v);
  const std::string name = pipeline_schedule_name(kind);
  if (kind != PipelineSchedule::Interleaved && v != 1)
    throw Error("virtual stages " + std::to_string(v) + ": only the interleaved schedule splits a stage into chunks; " +
                name + " needs 1");
  if (kind == PipelineSchedule::Interleaved && m % p != 0)
    throw Error("the interleaved schedule sends micro-batches round the " + std::to_string(p) +
                " stages in groups of " + std::to_string(p) + ": micro-batches " + std::to_string(m) +
                " must be a multiple of pipeline stages " + std::to_string(p));
}

std::string pipeline_warning(PipelineSchedule kind, int64_t p, int64_t m, int64_t v) {
  (void)v;
  if ((kind == PipelineSchedule::OneFOneB || kind == PipelineSchedule::ZbH1) && m < p)
    return "the bubble grows: " + std::to_string(m) + " micro-batches for " + std::to_string(p) +
           " pipeline stages never fill the pipeline (no steady 1F1B phase); 1f1b idles (p - 1)/(m + p - 1) = " +
           std::to_string(p - 1) + "/" + std::to_string(m + p - 1) + " of the time: use micro-batches >= stages";
  return "";
}

PipelineTable build_schedule(PipelineSchedule kind, int p, int m, int v) {
  validate_pipeline(kind, p, m, v);
  if (int64_t{p} * m * v > kMaxActions)
    throw Error("a pipeline schedule of " + std::to_string(p) + " stages x " + std::to_string(m) + " micro-batches x " +
                std::to_string(v) + " virtual stages has more than 2^24 (micro-batch, chunk) units to list");
  PipelineTable t;
  t.kind = kind;
  t.stages = p;
  t.micro_batches = m;
  t.chunks = v;
  t.actions.resize(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    std::vector<PipeAction>& out = t.actions[static_cast<size_t>(s)];
    switch (kind) {
      case PipelineSchedule::GPipe:
        for (int i = 0; i < m; ++i) out.push_back(act(s, PipeOp::Forward, i));
        for (int i = 0; i < m; ++i) out.push_back(act(s, PipeOp::Backward, i));
        break;
      case PipelineSchedule::OneFOneB: out = one_f_one_b(s, p, m, PipeOp::Backward); break;
      case PipelineSchedule::Interleaved: out = interleaved(s, p, m, v); break;
      case PipelineSchedule::ZbH1: out = zb_h1(s, p, m); break;
    }
  }
  return t;
}

std::vector<int64_t> stage_layer_split(PipelineSchedule kind, int64_t layers, int64_t p, int64_t v,
                                       const std::vector<int64_t>& given) {
  const std::string pp = "dist.pp " + std::to_string(p), nl = "model.layers " + std::to_string(layers);
  if (p > layers)
    throw Error(pp + " is more than " + nl + ": each pipeline stage holds at least one block (use dist.pp <= " +
                std::to_string(layers) + ")");
  const int64_t n = p * v;
  if (!given.empty()) {
    std::string list;
    int64_t sum = 0;
    for (int64_t x : given) list += (list.empty() ? "" : ", ") + std::to_string(x), sum += x;
    list = "dist.stage_layers [" + list + "]";
    if (static_cast<int64_t>(given.size()) != n)
      throw Error(list + " has " + std::to_string(given.size()) + (given.size() == 1 ? " entry" : " entries") + " for " + pp +
                  (v > 1 ? " x dist.virtual_stages " + std::to_string(v) : "") + ": expected " + std::to_string(n) +
                  " (one per stage, first to last)");
    for (size_t k = 0; k < given.size(); ++k)
      if (given[k] < 1)
        throw Error(list + ": stage " + std::to_string(k) + " has no blocks; each stage holds at least one");
    if (sum != layers)
      throw Error(list + " sums to " + std::to_string(sum) + " blocks, but " + nl + ": expected entries summing to " +
                  std::to_string(layers));
    return given;
  }
  if (kind == PipelineSchedule::Interleaved && layers % n != 0)
    throw Error("dist.schedule interleaved cuts the model into dist.pp " + std::to_string(p) +
                " x dist.virtual_stages " + std::to_string(v) + " = " + std::to_string(n) + " equal chunks, but " + nl +
                " is not a multiple of " + std::to_string(n));
  if (n > layers)
    throw Error(pp + " x dist.virtual_stages " + std::to_string(v) + " = " + std::to_string(n) + " chunks is more than " +
                nl + ": each chunk holds at least one block");
  std::vector<int64_t> out(static_cast<size_t>(n), layers / n);
  for (int64_t k = 0; k < layers % n; ++k) ++out[static_cast<size_t>(k)];
  return out;
}

std::vector<int> weight_gradient_order(const PipelineTable& t, int stage, int chunk) {
  std::vector<int> out;
  for (const PipeAction& a : t.actions.at(static_cast<size_t>(stage)))
    if (a.chunk == chunk && (a.op == PipeOp::Backward || a.op == PipeOp::BackwardWeight)) out.push_back(a.micro_batch);
  return out;
}

PipelineCosts chunk_costs(const PipelineCosts& stage, int v) {
  const double d = static_cast<double>(v);
  return {stage.forward / d, stage.backward_input / d, stage.backward_weight / d, stage.p2p};
}

namespace {

// The end times of every (virtual stage, micro-batch)'s forward, input gradient (Backward or
// BackwardInput) and weight gradient; NaN until the action has run.
struct EndTimes {
  int m;
  std::vector<double> f, b, w;
  EndTimes(int V, int m_) : m(m_) {
    const size_t n = static_cast<size_t>(V) * static_cast<size_t>(m_);
    f.assign(n, NAN), b.assign(n, NAN), w.assign(n, NAN);
  }
  size_t at(int k, int i) const { return static_cast<size_t>(k) * static_cast<size_t>(m) + static_cast<size_t>(i); }
};

double cost_of(PipeOp op, const PipelineCosts& c) {
  switch (op) {
    case PipeOp::Forward: return c.forward;
    case PipeOp::Backward: return c.backward_input + c.backward_weight;
    case PipeOp::BackwardInput: return c.backward_input;
    case PipeOp::BackwardWeight: return c.backward_weight;
  }
  return 0;
}

void check_action(const PipelineTable& t, int s, const PipeAction& a) {
  if (a.stage != s || a.micro_batch < 0 || a.micro_batch >= t.micro_batches || a.chunk < 0 || a.chunk >= t.chunks)
    throw Error("pipeline schedule: stage " + std::to_string(s) + " lists an action of stage " + std::to_string(a.stage) +
                ", micro-batch " + std::to_string(a.micro_batch) + ", chunk " + std::to_string(a.chunk) +
                " outside its " + std::to_string(t.micro_batches) + " micro-batches and " + std::to_string(t.chunks) +
                " chunks");
}

// The earliest start of `a` given the dependencies' end times, NaN when one has not run yet.
double ready_at(const PipelineTable& t, const EndTimes& e, const PipeAction& a, double p2p) {
  const int k = t.virtual_stage(a), last = t.virtual_stages() - 1;
  const size_t here = e.at(k, a.micro_batch);
  switch (a.op) {
    case PipeOp::Forward: return k == 0 ? 0.0 : e.f[e.at(k - 1, a.micro_batch)] + p2p;
    case PipeOp::Backward:
    case PipeOp::BackwardInput: {
      const double own = e.f[here];
      if (k == last) return own;
      const double next = e.b[e.at(k + 1, a.micro_batch)] + p2p;
      return std::isnan(own) || std::isnan(next) ? NAN : std::max(own, next);  // std::max drops a NaN
    }
    case PipeOp::BackwardWeight: return e.b[here];
  }
  return NAN;
}

void record_end(const PipelineTable& t, EndTimes& e, const PipeAction& a, double end) {
  const size_t here = e.at(t.virtual_stage(a), a.micro_batch);
  std::vector<double>& slot = a.op == PipeOp::Forward ? e.f : a.op == PipeOp::BackwardWeight ? e.w : e.b;
  if (!std::isnan(slot[here]))
    throw Error(std::string("pipeline schedule: stage ") + std::to_string(a.stage) + " lists " + pipe_op_letter(a.op) +
                " of micro-batch " + std::to_string(a.micro_batch) + ", chunk " + std::to_string(a.chunk) + " twice");
  slot[here] = end;
  if (a.op == PipeOp::Backward) e.w[here] = end;
}

}  // namespace

PipelineTiming simulate(const PipelineTable& t, const PipelineCosts& costs) {
  const int p = t.stages;
  if (static_cast<int>(t.actions.size()) != p) throw Error("pipeline schedule: the table's lists are not one a stage");
  EndTimes e(t.virtual_stages(), t.micro_batches);
  PipelineTiming r;
  r.stages.resize(static_cast<size_t>(p));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0.0);
  // A work list of stages that may progress: a stage runs its list until an action's dependency
  // has not ended, and wakes its neighbours whenever it finishes something they may wait on.
  std::vector<int> work;
  for (int s = p - 1; s >= 0; --s) work.push_back(s);
  while (!work.empty()) {
    const int s = work.back();
    work.pop_back();
    const std::vector<PipeAction>& list = t.actions[static_cast<size_t>(s)];
    size_t& n = next[static_cast<size_t>(s)];
    while (n < list.size()) {
      const PipeAction& a = list[n];
      check_action(t, s, a);
      const double ready = ready_at(t, e, a, costs.p2p);
      if (std::isnan(ready)) break;
      const double start = std::max(ready, free_at[static_cast<size_t>(s)]);
      const double end = start + cost_of(a.op, costs);
      record_end(t, e, a, end);
      free_at[static_cast<size_t>(s)] = end;
      r.stages[static_cast<size_t>(s)].push_back({a, start, end});
      ++n;
      const int to = t.sends_to(a);
      if (to >= 0) work.push_back(to);
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[static_cast<size_t>(s)] < t.actions[static_cast<size_t>(s)].size()) {
      const PipeAction& a = t.actions[static_cast<size_t>(s)][next[static_cast<size_t>(s)]];
      throw Error(std::string("pipeline schedule deadlocks: stage ") + std::to_string(s) + " waits forever at " +
                  pipe_op_letter(a.op) + " of micro-batch " + std::to_string(a.micro_batch) + ", chunk " +
                  std::to_string(a.chunk));
    }
  // Every unit's forward and input gradient must have run (a table missing a backward would end
  // early without deadlocking).
  for (size_t k = 0; k < e.f.size(); ++k)
    if (std::isnan(e.f[k]) || std::isnan(e.b[k]) || std::isnan(e.w[k]))
      throw Error("pipeline schedule: micro-batch " + std::to_string(k % static_cast<size_t>(t.micro_batches)) +
                  " of virtual stage " + std::to_string(k / static_cast<size_t>(t.micro_batches)) +
                  " misses its forward, input or weight gradient");
  for (double f : free_at) r.makespan = std::max(r.makespan, f);
  for (int s = 0; s < p; ++s) {
    double busy = 0;
    int64_t held = 0, peak = 0;
    for (const TimedAction& ta : r.stages[static_cast<size_t>(s)]) {
      busy += ta.end - ta.start;
      if (ta.action.op == PipeOp::Forward) peak = std::max(peak, ++held);
      if (is_backward(ta.action.op)) --held;
    }
    r.idle.push_back(r.makespan - busy);
    r.peak_in_flight.push_back(peak);
  }
  double idle = 0;
  for (double x : r.idle) idle += x;
  r.idle_fraction = r.makespan > 0 ? idle / (static_cast<double>(p) * r.makespan) : 0.0;
  return r;
}

PipelineBubble pipeline_bubble(PipelineSchedule kind, int64_t p, int64_t m, int64_t v) {
  validate_pipeline(kind, p, m, v);
  const double pm1 = static_cast<double>(p - 1), md = static_cast<double>(m);
  // Units of a whole stage's forward; F = B = W = 1, so a micro-batch's work is 3.
  PipelineBubble b;
  b.busy = 3.0 * md;
  switch (kind) {
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB: b.idle = 3.0 * pm1; break;
    case PipelineSchedule::Interleaved: b.idle = 3.0 * pm1 / static_cast<double>(v); break;
    case PipelineSchedule::ZbH1: b.idle = pm1; break;
  }
  return b;
}

int64_t pipeline_peak_in_flight(PipelineSchedule kind, int64_t p, int64_t m, int64_t v, int64_t stage) {
  validate_pipeline(kind, p, m, v);
  switch (kind) {
    case PipelineSchedule::GPipe: return m;
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZbH1: return std::min(p - stage, m);
    case PipelineSchedule::Interleaved: {
      const int64_t total = m * v;
      return m == p ? total : std::min(total, (p - stage - 1) * 2 + (v - 1) * p + 1);
    }
  }
  return m;
}

std::string schedule_text(const PipelineTable& t) {
  const PipelineTiming r = simulate(t, {1.0, 1.0, 1.0, 0.0});
  const auto slots = static_cast<size_t>(std::llround(r.makespan));
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(t.stages), std::vector<std::string>(slots, "."));
  size_t width = 1;
  for (int s = 0; s < t.stages; ++s)
    for (const TimedAction& ta : r.stages[static_cast<size_t>(s)]) {
      std::string cell = std::string(pipe_op_letter(ta.action.op)) + std::to_string(ta.action.micro_batch);
      if (t.chunks > 1) cell += ":" + std::to_string(ta.action.chunk);
      width = std::max(width, cell.size());
      for (auto slot = static_cast<size_t>(std::llround(ta.start)); slot < static_cast<size_t>(std::llround(ta.end)); ++slot)
        cells[static_cast<size_t>(s)][slot] = cell;
    }
  std::ostringstream o;
  o << pipeline_schedule_name(t.kind) << ": " << t.stages << " stages, " << t.micro_batches << " micro-batches";
  if (t.chunks > 1) o << ", " << t.chunks << " chunks a stage (F3:1 = micro-batch 3 on chunk 1)";
  o << "; F forward, B backward (input" << (t.kind == PipelineSchedule::ZbH1 ? "" : " and weight") << " gradient"
    << (t.kind == PipelineSchedule::ZbH1 ? ", 1 slot" : "s, 2 slots") << ")"
    << (t.kind == PipelineSchedule::ZbH1 ? ", W weight gradient" : "") << ", . idle\n";
  for (int s = 0; s < t.stages; ++s) {
    o << "stage " << s << " |";
    for (const std::string& c : cells[static_cast<size_t>(s)]) o << ' ' << c << std::string(width - c.size(), ' ');
    o << "\n";
  }
  o << "idle fraction " << r.idle_fraction << " (" << slots << " slots)\n";
  return o.str();
}

}  // namespace trainlab::dist
