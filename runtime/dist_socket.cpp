// TCP sockets for the store (runtime/dist_socket.h). Every wait is a poll()
// with what is left of a deadline, so no call here blocks longer than its
// caller allowed, whatever the peer does.
#include "runtime/dist_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace kiln::runtime::dist {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errnoText(int err) {
  std::string s = std::strerror(err);
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && !(s.size() > 1 && s[1] >= 'A' && s[1] <= 'Z'))
    s[0] = static_cast<char>(s[0] - 'A' + 'a');
  return s;
}

std::string hostPort(const std::string& host, uint16_t port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

bool isLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

SteadyClock::time_point deadlineAfter(std::chrono::milliseconds timeout) {
  const auto now = SteadyClock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::time_point::max() - now);
  return timeout >= room ? SteadyClock::time_point::max() : now + std::max(timeout, std::chrono::milliseconds(0));
}

namespace {

/// Milliseconds left before `deadline`, as poll() takes them (rounded up).
int pollMs(SteadyClock::time_point deadline) {
  const auto now = SteadyClock::now();
  if (deadline <= now) return 0;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(left, INT_MAX));
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

/// Resolves host:port; on failure returns false and a reason.
bool resolve(const std::string& host, uint16_t port, int flags, AddrInfo& out, std::string& reason) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags | AI_NUMERICSERV;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list);
  if (rc == 0) return true;
  reason = fmt::format("cannot resolve {}: {}", host, rc == EAI_SYSTEM ? errnoText(errno) : gai_strerror(rc));
  return false;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// One connection attempt to `ai` before `deadline`: the socket, or -1 and errno's text in `reason`.
int tryConnect(const addrinfo* ai, SteadyClock::time_point deadline, std::string& reason) {
  Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  if (!fd) {
    reason = errnoText(errno);
    return -1;
  }
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      reason = errnoText(errno);
      return -1;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int rc;
    while ((rc = ::poll(&p, 1, pollMs(deadline))) < 0 && errno == EINTR) {
    }
    if (rc == 0) {
      reason = "connection timed out";
      return -1;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (rc < 0 || getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      reason = errnoText(err);
      return -1;
    }
  }
  const int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  setNoDelay(fd.get());
  return fd.release();
}

}  // namespace

Fd listenTcp(const std::string& host, uint16_t port, uint16_t& boundPort) {
  // A loopback host is bound as given; anything else on every interface,
  // IPv6 with IPv4 mapped when the machine has IPv6, else IPv4 alone.
  std::vector<std::string> candidates;
  if (isLoopbackHost(host))
    candidates = {host == "localhost" ? "127.0.0.1" : host};
  else
    candidates = {"::", "0.0.0.0"};
  std::string reason = "no address to listen on";
  for (const std::string& bindHost : candidates) {
    AddrInfo ai;
    if (!resolve(bindHost, port, AI_PASSIVE | AI_NUMERICHOST, ai, reason)) continue;
    for (const addrinfo* a = ai.list; a; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd) {
        reason = errnoText(errno);
        continue;
      }
      int one = 1, zero = 0;
      setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (a->ai_family == AF_INET6) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
        reason = errnoText(errno);
        // A taken port is taken on every candidate address: say so at once.
        if (errno == EADDRINUSE) fail("store: cannot listen on {}: {}", hostPort(bindHost, port), reason);
        continue;
      }
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
      boundPort = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                   : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
      return fd;
    }
  }
  fail("store: cannot listen on {}: {}", hostPort(host, port), reason);
}

Fd connectTcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = deadlineAfter(timeout);
  std::string reason = "timed out";
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    AddrInfo ai;
    if (resolve(host, port, 0, ai, reason)) {
      for (const addrinfo* a = ai.list; a; a = a->ai_next) {
        const int fd = tryConnect(a, deadline, reason);
        if (fd >= 0) return Fd(fd);
      }
    }
    const auto now = SteadyClock::now();
    if (now >= deadline) break;
    // Retry: the server may not be up yet (rank 0 starts late).
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  fail("store: cannot reach {} after {} ms: {}", hostPort(host, port), timeout.count(), reason);
}

void sendAll(int fd, const uint8_t* data, size_t size, SteadyClock::time_point deadline) {
  while (size > 0) {
    pollfd p{fd, POLLOUT, 0};
    const int rc = ::poll(&p, 1, pollMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw SocketError(errnoText(errno));
    if (rc == 0) throw SocketError("timed out");
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw SocketError(errnoText(errno));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void recvSome(int fd, std::vector<uint8_t>& out, SteadyClock::time_point deadline) {
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, pollMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw SocketError(errnoText(errno));
    if (rc == 0) throw SocketError("timed out");
    uint8_t buffer[64 * 1024];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw SocketError(errnoText(errno));
    }
    if (n == 0) throw SocketError("closed by the peer");
    out.insert(out.end(), buffer, buffer + n);
    return;
  }
}

}  // namespace kiln::runtime::dist
