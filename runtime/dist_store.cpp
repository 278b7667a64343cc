// The semantics every store shares, PrefixStore and HashStore
// (runtime/dist_store.h).
#include "runtime/dist_store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "runtime/error.h"

namespace kiln::runtime::dist {

int64_t addTo(const std::string& key, const Bytes* current, int64_t delta, Bytes& updated) {
  int64_t value = 0;
  if (current && !current->empty()) {
    const char* begin = reinterpret_cast<const char*>(current->data());
    const char* end = begin + current->size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    KILN_CHECK(ec == std::errc() && ptr == end, "store: add to key {}: its value is not a decimal integer", key);
  }
  // A sum past int64 is an error, not undefined behaviour (found by the
  // store fuzzer: a client may send any delta).
  int64_t sum = 0;
  KILN_CHECK(!__builtin_add_overflow(value, delta, &sum), "store: add to key {}: {} + {} overflows a 64-bit integer",
             key, value, delta);
  value = sum;
  const std::string text = std::to_string(value);
  updated.assign(text.begin(), text.end());
  return value;
}

bool compareSetDecision(const Bytes* current, const Bytes& expected, const Bytes& desired, Bytes& result) {
  if (!current) {
    result = expected.empty() ? desired : expected;
    return expected.empty();
  }
  if (*current == expected) {
    result = desired;
    return true;
  }
  result = *current;
  return false;
}

std::string waitTimeoutMessage(const std::vector<std::string>& missing, std::chrono::milliseconds timeout) {
  return fmt::format("store: timed out after {} ms waiting for key(s) {}", timeout.count(), fmt::join(missing, ", "));
}

// --- PrefixStore ---

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : kDefaultTimeout), prefix_(std::move(prefix)), base_(std::move(base)) {
  KILN_ASSERT(base_, "a prefix store over no store");
}

std::vector<std::string> PrefixStore::keys(const std::vector<std::string>& ks) const {
  std::vector<std::string> out;
  out.reserve(ks.size());
  for (const std::string& k : ks) out.push_back(key(k));
  return out;
}

void PrefixStore::set(const std::string& k, const Bytes& value) { base_->set(key(k), value); }
Bytes PrefixStore::get(const std::string& k) {
  // The base waits with its own timeout; this store's applies.
  base_->wait({key(k)}, timeout());
  return base_->get(key(k));
}
int64_t PrefixStore::add(const std::string& k, int64_t delta) { return base_->add(key(k), delta); }
Bytes PrefixStore::compareSet(const std::string& k, const Bytes& expected, const Bytes& desired) {
  return base_->compareSet(key(k), expected, desired);
}
bool PrefixStore::check(const std::vector<std::string>& ks) { return base_->check(keys(ks)); }
bool PrefixStore::deleteKey(const std::string& k) { return base_->deleteKey(key(k)); }
void PrefixStore::wait(const std::vector<std::string>& ks, std::chrono::milliseconds t) { base_->wait(keys(ks), t); }

// --- HashStore ---

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard lock(mutex_);
    data_[key] = value;
  }
  changed_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  wait({key}, timeout());
  std::lock_guard lock(mutex_);
  auto it = data_.find(key);
  KILN_CHECK(it != data_.end(), "store: key {} was deleted while being read", key);
  return it->second;
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    Bytes updated;
    value = addTo(key, it == data_.end() ? nullptr : &it->second, delta, updated);
    data_[key] = std::move(updated);
  }
  changed_.notify_all();
  return value;
}

Bytes HashStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes result;
  bool stored = false;
  {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    stored = compareSetDecision(it == data_.end() ? nullptr : &it->second, expected, desired, result);
    if (stored) data_[key] = desired;
  }
  if (stored) changed_.notify_all();
  return result;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  for (const std::string& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

bool HashStore::deleteKey(const std::string& key) {
  std::lock_guard lock(mutex_);
  return data_.erase(key) > 0;
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto missing = [&] {
    std::vector<std::string> m;
    for (const std::string& k : keys)
      if (!data_.count(k)) m.push_back(k);
    return m;
  };
  if (!changed_.wait_for(lock, timeout, [&] { return missing().empty(); }))
    fail("{}", waitTimeoutMessage(missing(), timeout));
}

int64_t HashStore::numKeys() {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(data_.size());
}

}  // namespace kiln::runtime::dist
