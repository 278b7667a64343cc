// ScopedEnv: sets (or unsets) an environment variable for one test and puts
// back what was there, so that tests of the KILN_*_LIBRARY overrides leave
// the process as they found it.
#pragma once

#include <cstdlib>
#include <string>

namespace kiln::testutil {

class ScopedEnv {
 public:
  /// `value` null unsets the variable.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), saved_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string saved_;
  bool had_ = false;
};

}  // namespace kiln::testutil
