// Logging inside the compiler: KILN_LOG, a comma-separated list of channels,
// turns on lines on stderr that show what each stage did, as Halide's
// Lower.cpp logs every lowering step (docs/compile.md, "Logging"):
//
//   KILN_LOG=passes,fusion ./my_program      KILN_LOG=all ./my_program
//
// It lives in runtime/, the lowest layer, so that every layer logs through
// it. Off, it costs one relaxed load and a branch per log site: KILN_LOG is
// read and parsed once, at the first query, into a bitmask, and the
// KILN_LOG_TO macro formats its message only when its channel is on.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::logging {

/// A channel of KILN_LOG; each is one bit of the mask.
enum class Channel : uint32_t {
  passes = 1u << 0,      ///< the graph before the pipeline and after each pass that changed it
  fusion = 1u << 1,      ///< each fusion decision (the fusion passes' remarks), as it is made
  codegen = 1u << 2,     ///< each step compileGraph makes: a kernel with its launch shape, a library call
  cache = 1u << 3,       ///< kernel cache hits and misses, in memory and on disk, with the key's hash
  recompiles = 1u << 4,  ///< why kiln::compile traces a function again
};

/// The channel names KILN_LOG takes, in the order of the bits, then "all".
inline constexpr std::string_view kChannelNames[] = {"passes", "fusion", "codegen", "cache", "recompiles"};

namespace detail {
/// The mask of the channels that are on, or kUnparsed before KILN_LOG is read.
inline constexpr uint32_t kUnparsed = 1u << 31;
extern std::atomic<uint32_t> channels;
/// Reads KILN_LOG, warns once about names that are not channels, stores the
/// mask and returns it.
uint32_t parseEnvironment();
}  // namespace detail

/// Whether `channel` is on.
inline bool enabled(Channel channel) {
  uint32_t on = detail::channels.load(std::memory_order_relaxed);
  if (on & detail::kUnparsed) [[unlikely]]
    on = detail::parseEnvironment();
  return (on & static_cast<uint32_t>(channel)) != 0;
}

/// The mask of the channels named in `spec`, a KILN_LOG value ("passes,
/// cache", "all"; empty entries and spaces around names are ignored). Names
/// that are no channel are appended to `unknown` (comma-separated) when it
/// is given.
uint32_t parseChannels(std::string_view spec, std::string* unknown = nullptr);

/// The warning for unknown channel names (parseChannels' `unknown`): it
/// names the valid ones.
std::string unknownChannelsWarning(std::string_view unknown);

/// Turns on exactly the channels `spec` names, as if KILN_LOG had been
/// `spec`, warning about unknown names; nullptr reads KILN_LOG again. For
/// tests and tools: the environment is read only once otherwise.
void configure(const char* spec);

/// Writes `text` to stderr in one write, adding a newline when it has none,
/// so that lines of concurrent compiles do not interleave.
void write(std::string_view text);

}  // namespace kiln::logging

/// KILN_LOG_TO(channel, format, args...): writes the fmt-formatted line to
/// stderr when `channel` (a name of kiln::logging::Channel) is on; when it is
/// off, nothing is formatted and the arguments are not evaluated.
#define KILN_LOG_TO(channel, ...)                                                 \
  do {                                                                            \
    if (::kiln::logging::enabled(::kiln::logging::Channel::channel)) [[unlikely]] \
      ::kiln::logging::write(::fmt::format(__VA_ARGS__));                         \
  } while (0)
