// KILN_LOG's parsing, its warning and the writer of runtime/log.h.
#include "runtime/log.h"

#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace kiln::logging {

namespace detail {
// Constant-initialized, so that a log site in another library's static
// initializer sees kUnparsed and reads the environment itself.
constinit std::atomic<uint32_t> channels{kUnparsed};

uint32_t parseEnvironment() {
  // Two threads that race here parse the same environment; each stores
  // the same mask, and the warning may be printed twice, which is harmless.
  std::string unknown;
  const char* env = std::getenv("KILN_LOG");
  const uint32_t mask = env ? parseChannels(env, &unknown) : 0;
  if (!unknown.empty()) write(unknownChannelsWarning(unknown));
  channels.store(mask, std::memory_order_relaxed);
  return mask;
}
}  // namespace detail

namespace {
constexpr uint32_t kAll = (1u << std::size(kChannelNames)) - 1;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

uint32_t parseChannels(std::string_view spec, std::string* unknown) {
  uint32_t mask = 0;
  while (true) {
    const size_t comma = spec.find(',');
    const std::string_view name = trim(spec.substr(0, comma));
    if (name == "all") {
      mask |= kAll;
    } else if (!name.empty()) {
      uint32_t bit = 0;
      for (size_t i = 0; i < std::size(kChannelNames); ++i)
        if (kChannelNames[i] == name) bit = 1u << i;
      if (bit == 0 && unknown) *unknown += fmt::format("{}'{}'", unknown->empty() ? "" : ", ", name);
      mask |= bit;
    }
    if (comma == std::string_view::npos) return mask;
    spec.remove_prefix(comma + 1);
  }
}

std::string unknownChannelsWarning(std::string_view unknown) {
  std::string valid;
  for (std::string_view name : kChannelNames) valid += fmt::format("{}, ", name);
  return fmt::format("kiln: KILN_LOG names no channel {}; the channels are {}all", unknown, valid);
}

void configure(const char* spec) {
  if (!spec) {
    detail::parseEnvironment();
    return;
  }
  std::string unknown;
  const uint32_t mask = parseChannels(spec, &unknown);
  if (!unknown.empty()) write(unknownChannelsWarning(unknown));
  detail::channels.store(mask, std::memory_order_relaxed);
}

void write(std::string_view text) {
  std::string line(text);
  if (line.empty() || line.back() != '\n') line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace kiln::logging
