// trainlab-cli plan's output: the readable tables (bytes in GB = 10^9 and GiB = 2^30) and the JSON
// objects of a plan, a search and a check. cmd_plan.cpp parses the options and calls these.
#pragma once
#include <string>

#include "plan/planner.h"

namespace trainlab::cli {

// One object: plan_setup_json's members, then plan_result_json's.
Json plan_json(const PlanSetup& s, const PlanResult& r);
void print_plan_table(const PlanSetup& s, const PlanResult& r);
// --print-schedule: the layout's pipeline schedule as text (dist::schedule_text); refuses tables
// of more than 4096 stage x micro-batch x chunk units, which would not read on a terminal.
void print_schedule_table(const Layout& l);
void print_search_table(const PlanSetup& s, const SearchResult& r, int64_t top);
void print_search_json(const PlanSetup& s, const SearchResult& r);
// Runs check_plan on `device` (into `out`, or a temporary folder removed afterwards) and prints the
// ledger's bytes beside the prediction; returns the exit code.
int run_plan_check(const PlanSetup& s, const PlanResult& r, const std::string& device, const std::string& out,
                   int64_t steps, bool json);

}  // namespace trainlab::cli
