// TCP sockets for the store (runtime/dist_tcp_store.h) and the launcher:
// listening, connecting with retries until a deadline, and reading and
// writing whole buffers with a deadline. Errors are kiln::Error messages in
// the store's words ("store: cannot reach 127.0.0.1:29500 after 30000 ms:
// connection refused"); the lower-level SocketError carries errno's text
// for callers that add what they were doing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace kiln::runtime::dist {

using SteadyClock = std::chrono::steady_clock;

/// An I/O failure on a connected socket; what() is errno's text in lower
/// case ("connection reset by peer"), or "timed out", or "closed by the peer".
class SocketError : public Error {
 public:
  using Error::Error;
};

/// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// errno's text for `err`, starting in lower case ("connection refused").
std::string errnoText(int err);

/// "host:port", with brackets around an IPv6 address.
std::string hostPort(const std::string& host, uint16_t port);

/// Whether `host` names this machine's loopback (127.x.y.z, ::1, localhost).
bool isLoopbackHost(const std::string& host);

/// A non-blocking listening socket. A loopback `host` is listened on as is;
/// any other host on every interface (as PyTorch's TCPStore does), since it
/// names this machine as the others reach it. Port 0: the OS chooses;
/// `boundPort` is the port listened on. kiln::Error naming the address when
/// the port is taken.
Fd listenTcp(const std::string& host, uint16_t port, uint16_t& boundPort);

/// A blocking socket connected to host:port (TCP_NODELAY), retrying refused
/// and unreachable connections until `timeout` has passed; kiln::Error
/// "store: cannot reach host:port after N ms: <last reason>".
Fd connectTcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

/// Writes all of `data` before `deadline`; SocketError otherwise.
void sendAll(int fd, const uint8_t* data, size_t size, SteadyClock::time_point deadline);
/// Reads what is there (at least one byte) before `deadline`, appending it
/// to `out`; SocketError on timeout, error or the peer's close.
void recvSome(int fd, std::vector<uint8_t>& out, SteadyClock::time_point deadline);

/// now + timeout, saturating instead of overflowing.
SteadyClock::time_point deadlineAfter(std::chrono::milliseconds timeout);

}  // namespace kiln::runtime::dist
