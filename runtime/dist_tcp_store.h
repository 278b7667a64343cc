// kiln's TCP store (DESIGN.md §9; docs/distributed.md): a server that holds
// the key-value table of a job, and a client per process. As in PyTorch,
// rank 0 serves from a thread of its own process, or the launcher's agent
// serves and every worker is a client (KILN_USE_AGENT_STORE=1). The server
// is one thread polling every connection; a client parked in `get` or
// `wait` is an entry in its table (runtime/dist_store_state.h), so a slow,
// silent or hostile client never holds up the others. The wire format is
// runtime/dist_wire.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/dist_socket.h"
#include "runtime/dist_store.h"
#include "runtime/dist_wire.h"

namespace kiln::runtime::dist {

/// The server: a thread that listens on `host`:`port` (port 0: the OS
/// chooses; port() says which) until it is destroyed. A loopback host is
/// listened on as is, any other on every interface. The destructor stops
/// the thread and closes every connection; clients waiting then get an
/// error at once.
class TCPStoreServer {
 public:
  TCPStoreServer(const std::string& host, uint16_t port);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const { return port_; }
  /// Connections open now (for tests and the launcher's log).
  size_t numConnections() const { return numConnections_.load(); }

 private:
  void run();

  uint16_t port_ = 0;
  Fd listener_;
  Fd wakeRead_, wakeWrite_;
  std::atomic<size_t> numConnections_{0};
  std::thread thread_;
};

/// A client of the store at host:port, and, when `isServer`, its server too
/// (in this process, listening on `port`; with port 0 the OS chooses and
/// port() says which). Connecting retries until the timeout, so ranks may
/// start in any order. Every operation waits at most timeout() (get and
/// wait: their timeout, plus a second for the server's answer); an
/// operation that fails on the connection closes it, and the next one
/// connects again. Thread-safe: operations of several threads take turns.
class TCPStore final : public Store {
 public:
  TCPStore(std::string host, uint16_t port, bool isServer = false, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~TCPStore() override;

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

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  /// The server this store runs, or null when it is only a client.
  const TCPStoreServer* server() const { return server_.get(); }

 private:
  void connect();
  /// Sends `request` and returns the reply (kOk or kTimeout); kiln::Error
  /// for an error reply or a failed connection, naming `what`.
  wire::Reply call(const wire::Request& request, std::chrono::milliseconds waitFor, const std::string& what);
  wire::Reply exchange(const wire::Request& request, SteadyClock::time_point deadline);

  std::string host_;
  uint16_t port_;
  std::unique_ptr<TCPStoreServer> server_;
  std::mutex mutex_;
  Fd fd_;
  std::vector<uint8_t> in_;
};

}  // namespace kiln::runtime::dist
