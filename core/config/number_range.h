// NumberRange: the valid values of one numeric option or config key, an interval whose ends are
// open or closed, of integers or of real numbers; and the one parser of numbers a user typed.
//
// Every check of a number a user gives goes through here: the schema's keys (config.h), the flags
// of every trainlab-cli verb (cli/option_ranges.h), the quant.overrides items, the device index and
// TRAINLAB_THREADS. A hand-written "x < min" lets NaN through (every comparison with NaN is false);
// contains() is false for NaN and the infinities, whatever the ends. Messages write the range one
// way everywhere: "expected a number in (0, 10], got nan", "expected an integer in [1, 1e9]".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trainlab {

struct NumberRange {
  double min = 0, max = 0;
  bool min_open = false, max_open = false;  // an open end excludes its bound: (0, 10]
  bool integer = false;                     // whole numbers only

  bool contains(double x) const;
  // "a number in (0, 10]", "an integer in [0, 1e9]"
  std::string describe() const;
};

// [min, max] of integers.
NumberRange integers(double min, double max);
// Real numbers from min to max; open ends with the flags: reals(0, 10, true) is (0, 10].
NumberRange reals(double min, double max, bool min_open = false, bool max_open = false);

// A bound or value as the messages write it: powers of ten from a million up as 1e6, 1e9; other
// whole numbers below 1e15 in full (16777216); the rest in %g's form without '+' or leading
// exponent zeros (9.2e18, 0.001, 1e-12).
std::string format_number(double v);

// The number in `text` (the whole text, C locale whatever the process's locale: "0.5" is a half
// in a German desktop too). Decimal, an optional sign and exponent; "nan", "inf" and "infinity"
// parse (and then fall outside every range). nullopt when the text is not a number.
std::optional<double> parse_number(std::string_view text);

// Checks `text` against `r`. Returns "" when it is a number of the range's kind inside it, and
// sets *value (and, for an integer range, *whole: exact for integer text past 2^53); otherwise
// the reason: "expected an integer in [1, 1e9], got -1" (the text is shown: it is what the user
// typed on a command line, never the content of a file).
std::string check_number(const NumberRange& r, std::string_view text, double* value = nullptr,
                         int64_t* whole = nullptr);

}  // namespace trainlab
