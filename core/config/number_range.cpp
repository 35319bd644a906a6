#include "config/number_range.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "config/user_text.h"

namespace trainlab {

bool NumberRange::contains(double x) const {
  if (!std::isfinite(x)) return false;
  if (integer && std::floor(x) != x) return false;
  const bool above = min_open ? x > min : x >= min;
  const bool below = max_open ? x < max : x <= max;
  return above && below;
}

std::string NumberRange::describe() const {
  return std::string(integer ? "an integer in " : "a number in ") + (min_open ? "(" : "[") + format_number(min) + ", " +
         format_number(max) + (max_open ? ")" : "]");
}

NumberRange integers(double min, double max) { return {min, max, false, false, true}; }

NumberRange reals(double min, double max, bool min_open, bool max_open) { return {min, max, min_open, max_open, false}; }

std::string format_number(double v) {
  char buf[64];
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 1e15) {
    const double p = std::fabs(v) >= 1e6 ? std::round(std::log10(std::fabs(v))) : 0;
    if (p > 0 && std::pow(10.0, p) == std::fabs(v)) {  // a million and up, a power of ten: 1e6, -1e9
      std::snprintf(buf, sizeof buf, "%se%.0f", v < 0 ? "-1" : "1", p);
      return buf;
    }
    std::snprintf(buf, sizeof buf, "%.0f", v);  // every digit: 1048576, 16777216
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.6g", v);
  std::string s = buf;
  const auto e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  const bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.erase(0, 1);
  while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
  return mant + "e" + (neg ? "-" : "") + exp;
}

std::optional<double> parse_number(std::string_view text) {
  std::string_view t = text;
  bool neg = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  // from_chars would take a second sign ("--5"); a number has one.
  if (t.empty() || t[0] == '+' || t[0] == '-') return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (end != t.data() + t.size()) return std::nullopt;
  // Out of double's range: a magnitude too large is an infinity (outside every range here), one
  // too small to represent (a negative exponent, or 0.000...) rounds to zero.
  if (ec == std::errc::result_out_of_range) {
    const auto e = t.find_first_of("eE");
    const bool tiny = e != std::string_view::npos ? t.substr(e + 1).rfind('-', 0) == 0 : t[0] == '0' || t[0] == '.';
    v = tiny ? 0.0 : HUGE_VAL;
  } else if (ec != std::errc()) {
    return std::nullopt;
  }
  return neg ? -v : v;
}

std::string check_number(const NumberRange& r, std::string_view text, double* value, int64_t* whole) {
  const std::string shown = shown_text(text);
  const std::optional<double> v = parse_number(text);
  if (!v || !r.contains(*v)) return "expected " + r.describe() + ", got " + shown;
  int64_t n = static_cast<int64_t>(*v);  // exact below 2^53 (and range bounds are doubles)
  if (r.integer) {
    // Integer text is read exactly (a seed past 2^53 keeps every digit); "1e4" goes through the double.
    const std::string_view digits = text.substr(text[0] == '+' ? 1 : 0);
    int64_t exact = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), exact);
    if (ec == std::errc() && end == digits.data() + digits.size()) {
      n = exact;
      // long double holds every int64 exactly: the ends compare without rounding.
      const long double x = static_cast<long double>(n);
      if (x < static_cast<long double>(r.min) || x > static_cast<long double>(r.max))
        return "expected " + r.describe() + ", got " + shown;
    } else if (std::fabs(*v) >= 9007199254740992.0)
      return "expected " + r.describe() + " written in full, got " + shown;
  }
  if (value) *value = *v;
  if (whole) *whole = n;
  return {};
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t j = 1; j < n; ++j) {
      const auto d = static_cast<unsigned char>(s[i + j]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form only
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::string shown_text(std::string_view typed) {
  if (typed.empty()) return "nothing";
  if (!is_utf8(typed)) return "text that is not UTF-8";
  if (typed.size() <= 40) return std::string(typed);
  size_t cut = 37;
  while (cut > 0 && (static_cast<unsigned char>(typed[cut]) & 0xC0) == 0x80) --cut;
  return std::string(typed.substr(0, cut)) + "...";
}

}  // namespace trainlab
