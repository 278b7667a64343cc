// logOf(spec, fn): what fn writes to stderr while KILN_LOG's channels are
// exactly those `spec` names (runtime/log.h); logging is off again after.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "runtime/log.h"

namespace kiln::testutil {

template <typename Fn>
std::string logOf(const char* spec, Fn&& fn) {
  logging::configure(spec);
  testing::internal::CaptureStderr();
  fn();
  std::string err = testing::internal::GetCapturedStderr();
  logging::configure("");
  return err;
}

/// The lines of `text` (without their newlines) that start with `prefix`.
inline std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(prefix)) lines.push_back(line);
  return lines;
}

}  // namespace kiln::testutil
