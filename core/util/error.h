// trainlab::Error: the one exception type core throws. Its message is written for the user:
// it names the file, line, option or key at fault and what was expected.
#pragma once
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

}  // namespace trainlab
