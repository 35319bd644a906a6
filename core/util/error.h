// trainlab::Error: the one exception type core throws. Its message is written for the user:
// it names the file, line, option or key at fault and what was expected.
//
// describe_exception: what a top level (trainlab-cli's main, the app's worker and dialogs) shows
// for any exception it catches, so that no library's raw text reaches the user.
#pragma once
#include <exception>
#include <stdexcept>
#include <string>

namespace trainlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Thrown when a run's loss becomes NaN/inf outside fp16 loss scaling: the trainer catches it,
// keeps the run record, and reports "diverged at step N".
class DivergedError : public Error {
 public:
  DivergedError(const std::string& message, long step) : Error(message), m_step(step) {}
  long step() const { return m_step; }

 private:
  long m_step;
};

// The one-line message for an exception caught where a command or a run ends; `doing` says what
// was under way ("training", "evaluating the weights"):
//   trainlab::Error                    its own message
//   std::bad_alloc, std::length_error  "out of memory while training (...)"
//   std::filesystem::filesystem_error  "PATH: <the system's reason> (while training)"
//   std::system_error (and I/O errors) "<the system's reason> while training"
//   any other std::exception           "unexpected error while training: <its message without a
//                                      library's prefix such as [json.exception.type_error.302] or
//                                      vector::_M_range_check:, and without quoted input>"
// Where a place knows what it was doing (reading a named file, allocating a tensor), it throws an
// Error that says so; this is the net below them.
std::string describe_exception(const std::exception& e, const std::string& doing);

}  // namespace trainlab
