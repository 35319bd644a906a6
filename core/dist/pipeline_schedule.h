// Pipeline schedules as data (issue 39, first part): for p pipeline stages (ranks), m micro-batches
// and v model chunks per rank, the ordered list of actions each stage performs in one optimizer
// step, a timing simulation of those lists, and the closed forms the simulation reproduces. The
// runtime (a later part) executes these lists; the planner counts their idle time; the app draws
// them. Notation of ../shared/docs/DOMAIN.md section 4: p stages, m micro-batches.
//
// Virtual stages. With v chunks per rank (interleaved 1F1B, Narayanan et al. 2021; Megatron-LM's
// forward_backward_pipelining_with_interleaving) the model is cut into V = v p pieces; chunk c of
// rank s is virtual stage k = c p + s, so a micro-batch visits ranks 0..p-1 v times. Without
// interleaving v = 1 and k = s.
//
// What each action moves (the sends and receives are implied by op and position, not listed):
//   Forward(k, i)          receives micro-batch i's activation from virtual stage k-1 (unless k = 0,
//                          which reads the data) and sends its output activation to k+1 (unless
//                          k = V-1, the last, which computes the loss); it stores its activations.
//   Backward(k, i)         input and weight gradient together: receives the gradient of its output
//                          from k+1 (unless last: the loss's gradient) and sends its input gradient
//                          to k-1 (unless k = 0); frees the activations; adds micro-batch i's
//                          weight gradient into the stage's accumulated gradient.
//   BackwardInput(k, i)    (ZB-H1's B) the same sends and receives as Backward, input gradient only;
//                          frees the activations the input gradient needed.
//   BackwardWeight(k, i)   (ZB-H1's W) no communication: the weight gradient of micro-batch i, from
//                          the stored layer inputs and the output gradients B received, added into
//                          the accumulated gradient.
//
// Gradient order (why GPipe's backward runs in ascending micro-batch order). A pipelined step must
// give losses bit-identical to one rank accumulating the m micro-batches' gradients in micro-batch
// order 0, 1, ..., m-1 (floating-point sums are not associative). So every table here performs,
// on each stage and chunk, the weight-gradient adds (Backward or BackwardWeight) in ascending
// micro-batch order. 1F1B, interleaved 1F1B and ZB-H1 do so by construction; for GPipe we run the
// m backwards in ascending order 0..m-1 too (not the reverse order some drawings use): with
// dependencies only between neighbouring stages the makespan is the same either way, (m+p-1)(F+B),
// since the last stage can start backward 0 the moment its forward m-1 ends.
//
// The schedules (per stage s of p, w_s = min(p - s - 1, m) warm-up forwards):
//   gpipe        all m forwards, then all m backwards (ascending). Holds m micro-batches'
//                activations at every stage.
//   1f1b         Megatron's forward_backward_pipelining_without_interleaving: w_s forwards, then
//                m - w_s pairs (forward w_s+j, backward j), then the w_s remaining backwards. Holds
//                min(p - s, m) micro-batches' activations at stage s.
//   interleaved  Megatron's interleaved schedule over the m v (micro-batch, chunk) units of a rank:
//                forward unit u is chunk (u mod p v) / p of micro-batch (u / p v) p + u mod p, the
//                backward units the same with the chunks reversed; warm-up (p - s - 1) 2 + (v - 1) p
//                units (all of them when m = p), then one forward and one backward, then the rest.
//                Needs m a multiple of p (as Megatron does): micro-batches go round in groups of p.
//   zb-h1        Qi et al. 2023, "Zero Bubble Pipeline Parallelism", ZB-H1: 1F1B's order with each
//                backward split into B (input gradient, on the critical path) and W (weight
//                gradient, off it). Stage s defers its W passes: a W runs once more than s of them
//                are pending (the first stage at once, the last p - 1 behind), so the later stages
//                send B's gradients back without waiting and their deferred W passes fill the
//                tail, where 1F1B idles. B keeps 1F1B's position, so the peak activation count
//                is 1F1B's.
//
// Timing (simulate). Each action takes its cost: forward F, backward-input B, backward-weight W,
// Backward = B + W; a stage runs its list in order, an action starting when the stage is free and
// its dependencies have ended (+ a point-to-point time, 0 by default): Forward(k, i) needs
// Forward(k-1, i); Backward or BackwardInput(k, i) needs Backward/BackwardInput(k+1, i) and its own
// Forward(k, i); BackwardWeight(k, i) needs BackwardInput(k, i). Every stage does the same work
// m (F + B + W) (v times a chunk's costs), so each stage idles makespan - that, and the idle
// fraction is total idle / (p makespan). With F = 1, B + W = 2 the simulation gives exactly:
//   gpipe, 1f1b  (p - 1) / (m + p - 1)           (4 stages, 8 micro-batches: 3/11)
//   interleaved  (p - 1) / (v m + p - 1)         with a chunk's costs F = 1/v, B + W = 2/v: the
//                                                whole model's work is unchanged, the bubble's
//                                                (p - 1)(F + B + W) shrinks by v (Narayanan et al.)
//   zb-h1        (p - 1) / (3 m + p - 1) at F = B = W = 1 (the tests simulate these costs only):
//                p - 1 slots idle a stage, the paper's (p - 1)(F + B - W), where 1f1b idles 3 (p - 1)
// Those are the idle fractions of pipeline_bubble(); the unit tests check them against simulate()
// for p in {2, 4}, m in {4, 8, 16}.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trainlab::dist {

enum class PipelineSchedule : uint8_t { GPipe, OneFOneB, Interleaved, ZbH1 };
const char* pipeline_schedule_name(PipelineSchedule s);  // "gpipe", "1f1b", "interleaved", "zb-h1"
// Throws Error naming `what` (the option) and the four names.
PipelineSchedule pipeline_schedule_from_name(const std::string& name, const std::string& what);

enum class PipeOp : uint8_t { Forward, Backward, BackwardInput, BackwardWeight };
const char* pipe_op_letter(PipeOp op);  // F, B (Backward and BackwardInput), W

struct PipeAction {
  int stage = 0;        // the rank's pipeline stage, 0..p-1
  PipeOp op = PipeOp::Forward;
  int micro_batch = 0;  // 0..m-1
  int chunk = 0;        // 0..v-1 (interleaved), else 0
  bool operator==(const PipeAction&) const = default;
};

struct PipelineTable {
  PipelineSchedule kind = PipelineSchedule::OneFOneB;
  int stages = 1, micro_batches = 1, chunks = 1;   // p, m, v
  std::vector<std::vector<PipeAction>> actions;    // per stage, in execution order
  int virtual_stages() const { return stages * chunks; }
  int virtual_stage(const PipeAction& a) const { return a.chunk * stages + a.stage; }
  // The rank an action sends to (its output activation or input gradient), -1 for none.
  int sends_to(const PipeAction& a) const;
  // The rank an action receives from before it starts, -1 for none.
  int receives_from(const PipeAction& a) const;
};

// Throws Error naming the values: p, m, v >= 1; v > 1 only for interleaved; interleaved with m a
// multiple of p. Limits p, m, v to 2^20 each (build_schedule: p m v to 2^24).
void validate_pipeline(PipelineSchedule kind, int64_t p, int64_t m, int64_t v);
// A note for a schedule that works but wastes time ("" when none): m < p under 1f1b (and zb-h1):
// "the bubble grows: ...".
std::string pipeline_warning(PipelineSchedule kind, int64_t p, int64_t m, int64_t v);

PipelineTable build_schedule(PipelineSchedule kind, int p, int m, int v = 1);

// The blocks of each virtual stage k = c p + s (p v entries, in the order a micro-batch visits
// them): `given` (dist.stage_layers) when not empty, checked (p v entries, none zero, summing to
// `layers`), else a balanced split: layers / (p v) each, the first layers mod (p v) one more;
// interleaved needs p v to divide the layers there (Megatron's equal chunks). Throws Error naming
// the keys and values (dist.pp larger than model.layers, a list of the wrong length, a zero entry,
// a wrong sum).
std::vector<int64_t> stage_layer_split(PipelineSchedule kind, int64_t layers, int64_t p, int64_t v,
                                       const std::vector<int64_t>& given);

// The micro-batches in the order a stage adds their weight gradients into chunk `chunk`'s
// accumulated gradient (Backward or BackwardWeight actions): ascending for every table here.
std::vector<int> weight_gradient_order(const PipelineTable& t, int stage, int chunk);

// Costs of one action (one chunk's share under interleaving: chunk_costs). p2p: the time between
// an action's end and a dependent action's start on another stage.
struct PipelineCosts {
  double forward = 1.0, backward_input = 1.0, backward_weight = 1.0, p2p = 0.0;
};
// A stage's costs split over v chunks: each divided by v (p2p unchanged).
PipelineCosts chunk_costs(const PipelineCosts& stage, int v);

struct TimedAction {
  PipeAction action;
  double start = 0, end = 0;
};
struct PipelineTiming {
  std::vector<std::vector<TimedAction>> stages;  // per stage, in list order
  double makespan = 0;
  std::vector<double> idle;                      // per stage: makespan - its busy time
  double idle_fraction = 0;                      // total idle / (p makespan)
  // Per stage, the most (micro-batch, chunk) units whose activations are held at once: a Forward
  // done and its Backward or BackwardInput not yet (a unit is 1/v of the stage's layers).
  std::vector<int64_t> peak_in_flight;
};
// Throws Error when the lists deadlock (an action waits on one that cannot run) or are malformed.
PipelineTiming simulate(const PipelineTable& t, const PipelineCosts& costs = {});

// The closed forms the simulation reproduces (header comment) at the default costs (F = B = W = 1
// for a whole stage, a chunk's 1/v under interleaving), for the planner, where p m v may be too
// large to simulate: idle per stage and busy per stage in units of a stage's forward, and the
// peak in-flight units of stage s.
struct PipelineBubble {
  double idle = 0, busy = 0;
  double fraction() const { return idle + busy > 0 ? idle / (idle + busy) : 0.0; }
};
PipelineBubble pipeline_bubble(PipelineSchedule kind, int64_t p, int64_t m, int64_t v);
int64_t pipeline_peak_in_flight(PipelineSchedule kind, int64_t p, int64_t m, int64_t v, int64_t stage);

// The table as text for a learner: one row a stage, one column a time slot (F = B = W = 1 slot,
// Backward 2), cells "F3" (forward of micro-batch 3), "B3", "W3", with ":c" for chunk c when
// v > 1, and "." idle.
std::string schedule_text(const PipelineTable& t);

}  // namespace trainlab::dist
