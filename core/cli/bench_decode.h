// The decode benchmark moved to the library (decode/decode_bench.h: trainlab::bench_decode, same
// name, arguments and JSON). This header keeps `trainlab-cli bench --case decode` (cmd_bench.cpp)
// compiling unchanged: its unqualified call inside trainlab::cli finds trainlab::bench_decode. It
// goes away once cmd_bench.cpp includes decode/decode_bench.h itself.
#pragma once
#include "decode/decode_bench.h"
