// The store ranks meet through (DESIGN.md §9): a key-value table every rank
// of a job reaches, with blocking reads, that process groups use to
// exchange addresses (Gloo's full mesh, NCCL's unique id) and that the
// launcher uses to coordinate restarts. The contract is PyTorch's c10d
// Store (../shared/DIST_NOTES.md): `set` overwrites and wakes waiters, `get`
// waits for the key up to the store's timeout and then throws kiln::Error
// naming the key and the timeout, `add` keeps a decimal ASCII counter,
// `compareSet` is PyTorch's compare_set. Implementations: HashStore (one
// process, for threads), PrefixStore (a namespace inside another store),
// TCPStore and FileStore (runtime/dist_tcp_store.h, dist_file_store.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::runtime::dist {

using Bytes = std::vector<uint8_t>;

/// The default timeout of a store and of the process groups made on it,
/// PyTorch's; every store and group can be given its own.
inline constexpr std::chrono::milliseconds kDefaultTimeout{std::chrono::seconds(300)};

class Store {
 public:
  explicit Store(std::chrono::milliseconds timeout = kDefaultTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Sets `key` (overwriting it) and wakes everyone waiting for it.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /// The value of `key`, waiting up to timeout() for it to be set;
  /// kiln::Error naming the key and the timeout when it is not.
  virtual Bytes get(const std::string& key) = 0;
  /// Adds `delta` to the decimal integer at `key` (missing: 0) and returns
  /// the new value; kiln::Error when the value there is not an integer.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Sets `key` to `desired` when it is missing and `expected` is empty, or
  /// when its value equals `expected`; returns the value it has afterwards
  /// (`expected` when it was missing and `expected` is not empty).
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  /// Whether every key is set, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Removes `key`; whether it was there.
  virtual bool deleteKey(const std::string& key) = 0;
  /// Waits until every key is set, up to `timeout`; kiln::Error naming the
  /// keys still missing and the timeout.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  /// Keys set in the store (every prefix).
  virtual int64_t numKeys() = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // Text helpers.
  void set(const std::string& key, const std::string& value) { set(key, Bytes(value.begin(), value.end())); }
  std::string getString(const std::string& key) {
    Bytes b = get(key);
    return std::string(b.begin(), b.end());
  }

 private:
  std::chrono::milliseconds timeout_;
};

/// Every key of `base` under "<prefix>/": one store per group and per
/// restart, since Gloo's keys are write-once (DIST_NOTES).
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::set;
  using Store::wait;
  int64_t numKeys() override { return base_->numKeys(); }
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

/// A store in this process's memory, for ranks that are threads (tests).
class HashStore final : public Store {
 public:
  using Store::Store;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::set;
  using Store::wait;
  int64_t numKeys() override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
};

/// The semantics every store shares, for implementations: the new value of
/// an `add` on `current` (null: missing), kiln::Error naming the key when
/// it is not a decimal integer; and what compareSet stores and returns.
int64_t addTo(const std::string& key, const Bytes* current, int64_t delta, Bytes& updated);
/// Returns whether to store `desired`; `result` is what compareSet returns.
bool compareSetDecision(const Bytes* current, const Bytes& expected, const Bytes& desired, Bytes& result);
/// "timed out after 30000 ms waiting for key(s) rank/1, rank/2 in the store"
std::string waitTimeoutMessage(const std::vector<std::string>& missing, std::chrono::milliseconds timeout);

}  // namespace kiln::runtime::dist
