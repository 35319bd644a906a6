#include "train/pipeline_record.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace trainlab {

namespace {

std::string file_of(const std::string& run_dir) { return (std::filesystem::path(run_dir) / "pipeline.jsonl").string(); }

// The reader's field access: Error naming the file, the line and the field.
struct LineReader {
  std::string where;  // "FILE line N"
  const Json& at(const Json& j, const char* key) const {
    const auto it = j.is_object() ? j.find(key) : j.end();
    if (it == j.end()) throw Error(where + ": field '" + key + "' is missing");
    return *it;
  }
  double number(const Json& j, const char* key) const {
    const Json& v = at(j, key);
    if (!v.is_number()) throw Error(where + ": field '" + key + "': expected a number");
    return v.get<double>();
  }
  int whole(const Json& j, const char* key, int lo) const {
    const Json& v = at(j, key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > (int64_t(1) << 24))
      throw Error(where + ": field '" + key + "': expected an integer from " + std::to_string(lo));
    return static_cast<int>(v.get<int64_t>());
  }
};

dist::PipeOp op_from_letter(const std::string& s, bool split_backward, const std::string& where) {
  if (s == "F") return dist::PipeOp::Forward;
  if (s == "B") return split_backward ? dist::PipeOp::BackwardInput : dist::PipeOp::Backward;
  if (s == "W" && split_backward) return dist::PipeOp::BackwardWeight;
  throw Error(where + ": an action's op '" + s + "': expected F, B" + (split_backward ? " or W" : ""));
}

// One stage's object of a line into `r` (stage index s).
void read_stage(const LineReader& in, const Json& j, int s, PipelineStepRecord& r) {
  PipelineStageTimes t;
  t.stage = in.whole(j, "stage", 0);
  if (t.stage != s) throw Error(in.where + ": stage " + std::to_string(t.stage) + " where " + std::to_string(s) + " belongs");
  t.rank = in.whole(j, "rank", 0);
  t.step_ms = in.number(j, "step_ms");
  t.forward_ms = in.number(j, "forward_ms");
  t.backward_ms = in.number(j, "backward_ms");
  t.recv_wait_ms = in.number(j, "recv_wait_ms");
  t.bubble = in.number(j, "bubble");
  const Json& acts = in.at(j, "actions");
  if (!acts.is_array()) throw Error(in.where + ": field 'actions': expected an array");
  const bool split = r.schedule == "zb-h1";
  std::vector<dist::TimedAction> out;
  double busy = 0;
  for (const Json& a : acts) {
    if (!a.is_array() || a.size() != 5 || !a[0].is_string() || !a[1].is_number_integer() ||
        !a[2].is_number_integer() || !a[3].is_number() || !a[4].is_number())
      throw Error(in.where + ": field 'actions': expected [op, micro-batch, chunk, start_ms, end_ms] entries");
    dist::TimedAction ta;
    ta.action.stage = s;
    ta.action.op = op_from_letter(a[0].get<std::string>(), split, in.where);
    ta.action.micro_batch = a[1].get<int>();
    ta.action.chunk = a[2].get<int>();
    ta.start = a[3].get<double>();
    ta.end = a[4].get<double>();
    if (ta.action.micro_batch < 0 || ta.action.micro_batch >= r.m || ta.action.chunk < 0 || ta.action.chunk >= r.v ||
        !(ta.end >= ta.start))
      throw Error(in.where + ": stage " + std::to_string(s) + " has an action outside m, v or ending before it starts");
    busy += ta.end - ta.start;
    out.push_back(ta);
  }
  r.timing.stages.push_back(std::move(out));
  r.timing.idle.push_back(busy);  // made idle once the makespan is known
  r.stages.push_back(t);
}

}  // namespace

bool pipeline_timeline_due(long step) { return step <= 8 || step % 50 == 0; }

void append_pipeline_line(const std::string& run_dir, const Json& line) {
  const std::string path = file_of(run_dir);
  std::ofstream f(path, std::ios::app);
  f << line.dump() << '\n';
  f.flush();
  if (!f) throw Error("could not append to " + path);
}

std::vector<PipelineStepRecord> read_pipeline_timeline(const std::string& run_dir) {
  const std::string path = file_of(run_dir);
  std::vector<PipelineStepRecord> out;
  std::ifstream f(path);
  if (!f) return out;
  std::string text;
  for (long n = 1; std::getline(f, text); ++n) {
    if (text.empty()) continue;
    const LineReader in{path + " line " + std::to_string(n)};
    const Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(in.where + ": not a JSON object");
    PipelineStepRecord r;
    r.step = in.whole(j, "step", 1);
    const Json& sched = in.at(j, "schedule");
    if (!sched.is_string()) throw Error(in.where + ": field 'schedule': expected a schedule's name");
    r.schedule = sched.get<std::string>();
    dist::pipeline_schedule_from_name(r.schedule, in.where + ": field 'schedule'");
    r.p = in.whole(j, "p", 1);
    r.m = in.whole(j, "m", 1);
    r.v = in.whole(j, "v", 1);
    r.simulated_bubble = in.number(j, "simulated_bubble");
    r.formula_bubble = in.number(j, "formula_bubble");
    const Json& stages = in.at(j, "stages");
    if (!stages.is_array() || static_cast<int>(stages.size()) != r.p)
      throw Error(in.where + ": field 'stages': expected an array of p = " + std::to_string(r.p) + " stages");
    for (int s = 0; s < r.p; ++s) read_stage(in, stages[static_cast<size_t>(s)], s, r);
    for (const PipelineStageTimes& t : r.stages) r.timing.makespan = std::max(r.timing.makespan, t.step_ms);
    double idle = 0;
    for (double& busy : r.timing.idle) idle += (busy = std::max(0.0, r.timing.makespan - busy));
    r.timing.idle_fraction = r.timing.makespan > 0 ? idle / (r.p * r.timing.makespan) : 0.0;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace trainlab
