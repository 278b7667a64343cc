// errorOf(fn): the message of the kiln::Error that fn throws, or "no error",
// so that a test can compare a whole message in one EXPECT_EQ.
#pragma once

#include <functional>
#include <string>

#include "runtime/error.h"

inline std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "no error";
}
