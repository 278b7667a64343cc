// The disk kernel cache of codegen/disk_cache.h.
//
// Entry file: "KILNKC01" | u64 key size | key | u64 payload size | payload |
// u64 FNV-1a of (key, payload); integers little-endian.
#include "codegen/disk_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/log.h"
#include "runtime/profiler_events.h"

namespace kiln::codegen {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'C', '0', '1'};
constexpr const char* kSuffix = ".kc";

uint64_t fnv1a(std::string_view data, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool getU64(std::string_view& in, uint64_t& v) {
  if (in.size() < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(8);
  return true;
}

}  // namespace

std::filesystem::path DiskCache::defaultDirectory() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR")) {
    const std::string d(dir);
    if (d.empty() || d == "off" || d == "0") return {};
    return d;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "kiln";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "kiln";
  return {};
}

DiskCache& DiskCache::instance() {
  static auto* cache = new DiskCache(defaultDirectory());
  return *cache;
}

DiskCache::DiskCache(std::filesystem::path directory)
    : directory_(std::move(directory)), enabled_(!directory_.empty()) {}

std::filesystem::path DiskCache::pathFor(const std::string& key) const {
  return directory_ / fmt::format("{:016x}{}", fnv1a(key), kSuffix);
}

std::optional<std::string> DiskCache::load(const std::string& key) {
  if (!enabled()) return std::nullopt;
  const std::filesystem::path path = pathFor(key);
  profiler::RecordFunction range("cache", "disk_cache_miss");  // renamed on a hit
  std::ifstream in(path, std::ios::binary);
  auto miss = [&] {
    KILN_LOG_TO(cache, "kiln::cache: disk miss {:016x}", fnv1a(key));
    std::lock_guard lock(mutex_);
    stats_.misses++;
    return std::nullopt;
  };
  if (!in) return miss();
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::string_view rest(text);
  uint64_t keySize = 0, payloadSize = 0, checksum = 0;
  bool ok = rest.size() >= sizeof kMagic && std::memcmp(rest.data(), kMagic, sizeof kMagic) == 0;
  if (ok) rest.remove_prefix(sizeof kMagic);
  ok = ok && getU64(rest, keySize) && keySize <= rest.size();
  const std::string_view storedKey = ok ? rest.substr(0, keySize) : std::string_view();
  if (ok) rest.remove_prefix(keySize);
  ok = ok && getU64(rest, payloadSize) && payloadSize <= rest.size();
  const std::string_view payload = ok ? rest.substr(0, payloadSize) : std::string_view();
  if (ok) rest.remove_prefix(payloadSize);
  ok = ok && getU64(rest, checksum) && rest.empty() && checksum == fnv1a(payload, fnv1a(storedKey));
  if (!ok) {
    KILN_LOG_TO(cache, "kiln::cache: disk miss {:016x}: the entry is damaged; removed", fnv1a(key));
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    std::lock_guard lock(mutex_);
    stats_.corrupt++;
    stats_.misses++;
    return std::nullopt;
  }
  if (storedKey != key) return miss();  // another key with the same hash
  KILN_LOG_TO(cache, "kiln::cache: disk hit {:016x} ({} bytes)", fnv1a(key), payload.size());
  if (range.event()) [[unlikely]]
    range.event()->name = "disk_cache_hit";
  std::lock_guard lock(mutex_);
  stats_.hits++;
  return std::string(payload);
}

void DiskCache::store(const std::string& key, std::string_view payload) {
  if (!enabled()) return;
  std::string bytes(kMagic, sizeof kMagic);
  putU64(bytes, key.size());
  bytes += key;
  putU64(bytes, payload.size());
  bytes += payload;
  putU64(bytes, fnv1a(payload, fnv1a(key)));
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) return disable(fmt::format("cannot create {}: {}", directory_.string(), error.message()));
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path path = pathFor(key);
  const std::filesystem::path tmp = path.string() + fmt::format(".{}.{}.tmp", ::getpid(), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::filesystem::remove(tmp, error);
      return disable(fmt::format("cannot write {}", tmp.string()));
    }
  }
  std::filesystem::rename(tmp, path, error);
  if (error) {
    std::filesystem::remove(tmp, error);
    return disable(fmt::format("cannot write {}", path.string()));
  }
  KILN_LOG_TO(cache, "kiln::cache: disk store {:016x} ({} bytes)", fnv1a(key), payload.size());
  std::lock_guard lock(mutex_);
  stats_.writes++;
}

int64_t DiskCache::clear() {
  if (directory_.empty()) return 0;
  int64_t removed = 0;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(directory_, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with(kSuffix) || name.ends_with(".tmp")) removed += std::filesystem::remove(it->path(), error);
  }
  return removed;
}

DiskCacheStats DiskCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void DiskCache::disable(const std::string& why) {
  if (enabled_.exchange(false))
    std::fprintf(stderr, "kiln: kernel disk cache turned off: %s (set KILN_CACHE_DIR to a writable directory)\n",
                 why.c_str());
}

}  // namespace kiln::codegen
