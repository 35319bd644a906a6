// The decode benchmark (issue 5), behind `trainlab-cli bench --case decode` and
// `trainlab-cli generate --bench`.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainlab {

// First {"case": "bandwidth"} with the device's measured copy bandwidth (backend/bandwidth.h), then
// one JSON object per weight format: tokens/s of greedy decoding (after one untimed token that
// captures the graph), weight and KV-cache bytes a token, the weight bytes read a second, and the
// ceiling that the measured copy bandwidth puts on tokens/s (fraction_of_ceiling: tokens/s over it). The model: `weights` (a char-gpt file, fp32 or quantized) or, when
// empty, a random-initialised `preset` (tiny, small, gpt2, xl; "small" when empty too). `formats`:
// comma-separated fp32, bf16, int8, int4, int4-g64, int4-g128 (the whole token in one
// cooperative kernel), each optionally with -graph (a kernel per operation, replayed as a CUDA
// graph) or -nograph (a kernel per operation, launched one by one); empty: the file's own format
// for a quantized file, else fp32,bf16,int8,int4 and bf16/int4 with -graph and -nograph (fp32
// only on the CPU). A format that fails gives {"case", "model", "format", "error"} instead.
// on_row, when given, receives each object as soon as it is measured (a large model takes
// seconds a format to prepare: a caller can print the rows as they come).
// batches: the formats are measured at each batch size in turn (sequences decoded side by side,
// each weight read once a step for all of them; 1..16, else Error naming --batch); a row's "batch"
// says which, tokens_per_s counts the tokens of every sequence; weight_bytes_per_s, us_per_step,
// device_us_per_step and the *bytes_per_token fields are a step's (every sequence's KV cache); a
// batch above one runs the kernel-per-operation graph on CUDA (one_kernel false).
std::vector<nlohmann::json> bench_decode(const std::string& device, const std::string& weights, const std::string& preset,
                                         const std::string& formats, int64_t tokens, uint64_t seed,
                                         const std::function<void(const nlohmann::json&)>& on_row = {},
                                         const std::vector<int64_t>& batches = {1});

}  // namespace trainlab
