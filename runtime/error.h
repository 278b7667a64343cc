// Errors: kiln::Error for user mistakes, KILN_ASSERT for kiln's own bugs.
//
// DESIGN.md §10: a user error is lower-case, has no final period and names the
// op, shapes, dtypes and devices involved. Messages are built with fmt so that
// every layer formats the same way. An internal invariant that fails is a kiln
// bug, never the user's: it throws kiln::InternalError whose message says so,
// instead of aborting, so that a long-running process keeps its state.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln {

/// A mistake in how kiln was used: bad shapes, dtypes, devices, arguments.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A broken internal invariant: always a kiln bug.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

/// Throws kiln::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] void assertFailed(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace kiln

/// Checks a user-facing condition; on failure throws kiln::Error(format, ...).
#define KILN_CHECK(cond, ...)  \
  do {                         \
    if (!(cond)) [[unlikely]]  \
      ::kiln::fail(__VA_ARGS__); \
  } while (0)

/// Checks an internal invariant; on failure throws kiln::InternalError that
/// names the file and line and says this is a kiln bug.
#define KILN_ASSERT(cond, ...)                                                      \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      ::kiln::detail::assertFailed(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
  } while (0)
