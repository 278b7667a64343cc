// KILN_ALLOC_CONF's parser (runtime/alloc_conf.h).
#include "runtime/alloc_conf.h"

#include <bit>
#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

#include "runtime/error.h"

namespace kiln::runtime {

namespace {
constexpr size_t kMiB = size_t(1) << 20;
// The large pool's segment: a smaller max_split_size would forbid splitting
// the very segments that 1-10 MiB requests are carved from (PyTorch's rule).
constexpr size_t kMinMaxSplitMiB = 20;
constexpr std::string_view kValidKeys =
    "max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions, memory_limit_mb";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
T parseNumber(std::string_view key, std::string_view value, std::string_view expected) {
  T result{};
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, result);
  KILN_CHECK(ec == std::errc() && ptr == end && !value.empty(), "KILN_ALLOC_CONF: {}: '{}' is not {}", key, value,
             expected);
  return result;
}

// MiB to bytes, refusing what does not fit in size_t.
size_t mebibytes(std::string_view key, std::string_view value) {
  const auto mib = parseNumber<uint64_t>(key, value, "a whole number of MiB");
  KILN_CHECK(mib <= SIZE_MAX / kMiB, "KILN_ALLOC_CONF: {}: {} MiB is more than the address space", key, mib);
  return static_cast<size_t>(mib) * kMiB;
}
}  // namespace

AllocConf AllocConf::parse(std::string_view text) {
  AllocConf conf;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;  // "a:1,,b:2" and a trailing comma are harmless
    const size_t colon = item.find(':');
    KILN_CHECK(colon != std::string_view::npos, "KILN_ALLOC_CONF: '{}' is not key:value; valid keys: {}", item,
               kValidKeys);
    const std::string_view key = trim(item.substr(0, colon));
    const std::string_view value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      conf.maxSplitSize = mebibytes(key, value);
      KILN_CHECK(conf.maxSplitSize > kMinMaxSplitMiB * kMiB,
                 "KILN_ALLOC_CONF: max_split_size_mb: {} is too small, must be more than {}", value, kMinMaxSplitMiB);
    } else if (key == "garbage_collection_threshold") {
      conf.garbageCollectionThreshold = parseNumber<double>(key, value, "a number");
    } else if (key == "roundup_power2_divisions") {
      conf.roundupPower2Divisions = parseNumber<int>(key, value, "a whole number");
    } else if (key == "memory_limit_mb") {
      conf.memoryLimit = mebibytes(key, value);
    } else {
      fail("KILN_ALLOC_CONF: unknown key '{}'; valid keys: {}", key, kValidKeys);
    }
  }
  conf.validate();
  return conf;
}

void AllocConf::validate() const {
  KILN_CHECK(maxSplitSize == SIZE_MAX || maxSplitSize > kMinMaxSplitMiB * kMiB,
             "KILN_ALLOC_CONF: max_split_size_mb must be more than {} (got {} bytes)", kMinMaxSplitMiB, maxSplitSize);
  KILN_CHECK(garbageCollectionThreshold == 0 || (garbageCollectionThreshold > 0 && garbageCollectionThreshold < 1),
             "KILN_ALLOC_CONF: garbage_collection_threshold must be between 0 and 1, exclusive (got {})",
             garbageCollectionThreshold);
  KILN_CHECK(roundupPower2Divisions == 0 ||
                 (roundupPower2Divisions > 0 && std::has_single_bit(static_cast<unsigned>(roundupPower2Divisions))),
             "KILN_ALLOC_CONF: roundup_power2_divisions must be 0 or a power of two (got {})", roundupPower2Divisions);
}

AllocConf AllocConf::fromEnvironment() {
  const char* env = std::getenv("KILN_ALLOC_CONF");
  return env ? parse(env) : AllocConf();
}

}  // namespace kiln::runtime
