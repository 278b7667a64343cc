// A store in a file, for the processes of one machine (PyTorch's FileStore
// idea; init method "file:///path"): the file is a log of records, each a
// set or a delete, appended under an exclusive flock(), and every process
// replays what others appended since it last looked. `get` and `wait` poll
// the file until their keys appear or the timeout passes. The semantics are
// every store's (runtime/dist_store.h). Each FileStore counts itself in the
// file as a user; the last one to go removes the file, so a path can serve
// one job after another. A file left by a job that crashed keeps its keys:
// give each job a fresh path (docs/distributed.md).
//
// Format: the 8 bytes "KILNFS01", then records: u8 kind (1 set, 2 delete),
// u32 key length, key, u32 value length, value (little-endian; the bounds of
// the wire, runtime/dist_wire.h). A record cut short by a crash is cut off
// by the next writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/dist_socket.h"
#include "runtime/dist_store.h"

namespace kiln::runtime::dist {

class FileStore final : public Store {
 public:
  /// Opens (creating) the store at `path`; kiln::Error naming the path
  /// when it cannot be opened or is not a kiln file store.
  explicit FileStore(std::string path, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::set;
  using Store::wait;
  /// Keys set, without the store's own user count.
  int64_t numKeys() override;

  const std::string& path() const { return path_; }

 private:
  class Lock;
  void open();
  /// Reads the records appended since the last look (under the lock).
  void refresh();
  void append(uint8_t kind, const std::string& key, const Bytes& value);
  const Bytes* find(const std::string& key) const;

  std::string path_;
  std::mutex mutex_;  // threads of this process take turns; flock() orders processes
  Fd fd_;
  uint64_t offset_ = 0;  // bytes of the file replayed into data_
  std::unordered_map<std::string, Bytes> data_;
};

}  // namespace kiln::runtime::dist
