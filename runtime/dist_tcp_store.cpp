// The TCP store's server loop and client (runtime/dist_tcp_store.h).
//
// Note [The store server never waits on a client]: every socket is
// non-blocking and the loop only reads what poll() says is there, so a
// client that sends half a request, never reads its replies or vanishes
// costs its own buffers only. A connection's requests are answered in
// order: while one is parked (get, wait) or its reply is not yet written,
// the next is left in the buffer, which bounds what it holds to one
// request (wire::kMaxRequestBytes) and one reply. A malformed request gets
// an error reply, then the connection is shut for writing and closed once
// the peer closes or after kDrainTime, so the peer reads the error before
// the close.
#include "runtime/dist_tcp_store.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <map>

#include "runtime/dist_store_state.h"

namespace kiln::runtime::dist {

using wire::ParseResult;
using wire::Query;

namespace {

constexpr size_t kMaxConnections = 4096;
constexpr size_t kReadPerTurn = 1 << 20;  // fairness: bytes read from one connection per loop turn
constexpr auto kDrainTime = std::chrono::seconds(2);
/// How much longer than a get's or wait's timeout a client waits for the
/// server's own timeout reply before it gives up on the server.
constexpr auto kReplySlack = std::chrono::seconds(1);

struct Connection {
  Fd fd;
  std::vector<uint8_t> in;
  size_t inPos = 0;
  size_t needed = 0;  // parse again only once this many bytes are buffered
  std::vector<uint8_t> out;
  size_t outPos = 0;
  bool closing = false;                  // close once `out` is written
  SteadyClock::time_point drainUntil{};  // set once shut for writing
  bool dead = false;

  size_t buffered() const { return in.size() - inPos; }
  bool flushed() const { return outPos == out.size(); }
  bool draining() const { return drainUntil != SteadyClock::time_point{}; }
};

/// Writes what the socket takes; false when the connection failed.
bool flush(Connection& c) {
  while (!c.flushed()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.outPos, c.out.size() - c.outPos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    c.outPos += static_cast<size_t>(n);
  }
  c.out.clear();
  c.outPos = 0;
  return true;
}

/// Reads what is there, up to the bounds; false when the peer closed or failed.
bool fill(Connection& c) {
  size_t budget = kReadPerTurn;
  uint8_t buffer[64 * 1024];
  while (budget > 0 && (c.draining() || c.buffered() < wire::kMaxRequestBytes)) {
    const ssize_t n = ::recv(c.fd.get(), buffer, std::min(sizeof(buffer), budget), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    if (n == 0) return false;
    if (!c.draining()) c.in.insert(c.in.end(), buffer, buffer + n);
    budget -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// --- the server ---

TCPStoreServer::TCPStoreServer(const std::string& host, uint16_t port) {
  listener_ = listenTcp(host, port, port_);
  int fds[2];
  KILN_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "store: cannot make the server's wake-up pipe: {}",
             errnoText(errno));
  wakeRead_.reset(fds[0]);
  wakeWrite_.reset(fds[1]);
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  const uint8_t byte = 1;
  while (::write(wakeWrite_.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

void TCPStoreServer::run() {
  using Clock = StoreState::Clock;
  StoreState state;
  std::map<StoreState::ClientId, Connection> conns;
  StoreState::ClientId nextId = 1;
  std::vector<StoreState::Outgoing> outgoing;
  Clock::time_point listenerPausedUntil{};
  std::vector<pollfd> fds;
  std::vector<StoreState::ClientId> ids;

  auto dispatch = [&] {
    for (StoreState::Outgoing& o : outgoing) {
      auto it = conns.find(o.client);
      if (it == conns.end()) continue;
      wire::encodeReply(o.type, o.reply, it->second.out);
      if (!flush(it->second)) it->second.dead = true;
    }
    outgoing.clear();
  };

  // Answers the complete requests of `c` that may be answered now; whether any was.
  auto serve = [&](StoreState::ClientId id, Connection& c, Clock::time_point now) {
    bool progress = false;
    while (!c.dead && !c.closing && c.flushed() && !state.parked(id) && c.buffered() > 0 && c.buffered() >= c.needed) {
      wire::Request request;
      ParseResult r = wire::parseRequest(c.in.data() + c.inPos, c.buffered(), request);
      if (r.kind == ParseResult::kIncomplete && r.size > wire::kMaxRequestBytes) {
        r.kind = ParseResult::kMalformed;
        r.error = fmt::format("a request of at least {} bytes exceeds {}", r.size, wire::kMaxRequestBytes);
      }
      if (r.kind == ParseResult::kIncomplete) {
        c.needed = r.size;
        break;
      }
      progress = true;
      if (r.kind == ParseResult::kMalformed) {
        wire::Reply error;
        error.status = wire::Status::kError;
        error.message = "store: malformed request: " + r.error;
        outgoing.push_back({id, Query::kValidate, std::move(error)});
        c.closing = true;
        c.in.clear();
        c.inPos = 0;
        dispatch();
        break;
      }
      c.inPos += r.size;
      c.needed = 0;
      state.handle(id, request, now, outgoing);
      dispatch();
    }
    if (c.inPos > 0 && c.inPos * 2 >= c.in.size()) {
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.inPos));
      c.inPos = 0;
    }
    return progress;
  };

  while (true) {
    const auto now = Clock::now();
    fds.clear();
    ids.clear();
    fds.push_back({wakeRead_.get(), POLLIN, 0});
    const bool listening = conns.size() < kMaxConnections && now >= listenerPausedUntil;
    fds.push_back({listener_.get(), static_cast<short>(listening ? POLLIN : 0), 0});
    Clock::time_point wakeAt = state.nextDeadline();
    if (!listening && conns.size() < kMaxConnections) wakeAt = std::min(wakeAt, listenerPausedUntil);
    for (auto& [id, c] : conns) {
      short events = 0;
      if (c.draining() || (!c.closing && c.buffered() < wire::kMaxRequestBytes)) events |= POLLIN;
      if (!c.flushed()) events |= POLLOUT;
      if (c.draining()) wakeAt = std::min(wakeAt, c.drainUntil);
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
    }
    int timeoutMs = -1;
    if (wakeAt != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(wakeAt - now).count();
      timeoutMs = static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) break;
    if (fds[0].revents) break;  // the destructor asks to stop
    const auto then = Clock::now();

    if (fds[1].revents & POLLIN) {
      while (conns.size() < kMaxConnections) {
        const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          // Out of file descriptors: try again a little later instead of spinning.
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            listenerPausedUntil = then + std::chrono::milliseconds(100);
          break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conns[nextId++].fd.reset(fd);
      }
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const short ev = fds[i + 2].revents;
      if (!ev) continue;
      Connection& c = conns.at(ids[i]);
      if ((ev & (POLLIN | POLLHUP | POLLERR)) && !fill(c)) c.dead = true;
      if ((ev & POLLOUT) && !flush(c)) c.dead = true;
      // Hung up both ways (reset, or closed after our shutdown): nothing
      // more can be said to it, and poll() would report it on every turn.
      if (ev & (POLLHUP | POLLERR)) c.dead = true;
    }
    state.expire(then, outgoing);
    dispatch();
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& [id, c] : conns) {
        try {
          progress |= serve(id, c, then);
        } catch (const std::exception&) {
          c.dead = true;  // a bug or out of memory: lose this client, keep the others
        }
      }
    }
    for (auto it = conns.begin(); it != conns.end();) {
      Connection& c = it->second;
      if (c.closing && c.flushed() && !c.draining() && !c.dead) {
        ::shutdown(c.fd.get(), SHUT_WR);
        c.drainUntil = then + kDrainTime;
      }
      if (c.dead || (c.draining() && then >= c.drainUntil)) {
        state.drop(it->first);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    numConnections_.store(conns.size());
  }
}

// --- the client ---

TCPStore::TCPStore(std::string host, uint16_t port, bool isServer, std::chrono::milliseconds timeout)
    : Store(timeout), host_(std::move(host)), port_(port) {
  if (isServer) {
    server_ = std::make_unique<TCPStoreServer>(host_, port_);
    port_ = server_->port();
  }
  std::lock_guard lock(mutex_);
  connect();
}

TCPStore::~TCPStore() = default;

void TCPStore::connect() {
  fd_ = connectTcp(host_, port_, timeout());
  in_.clear();
  wire::Request hello;
  hello.type = Query::kValidate;
  wire::Reply reply;
  try {
    reply = exchange(hello, deadlineAfter(timeout()));
  } catch (const Error& e) {
    fd_.reset();
    fail("store: {} does not answer as a kiln store: {}", hostPort(host_, port_), e.what());
  }
  if (reply.status != wire::Status::kOk) {
    fd_.reset();
    fail("{}", reply.message);
  }
}

wire::Reply TCPStore::exchange(const wire::Request& request, SteadyClock::time_point deadline) {
  Bytes bytes;
  wire::encodeRequest(request, bytes);
  sendAll(fd_.get(), bytes.data(), bytes.size(), deadline);
  wire::Reply reply;
  while (true) {
    const ParseResult r = wire::parseReply(request.type, in_.data(), in_.size(), reply);
    if (r.kind == ParseResult::kComplete) {
      in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(r.size));
      return reply;
    }
    if (r.kind == ParseResult::kMalformed) throw SocketError("a malformed reply: " + r.error);
    recvSome(fd_.get(), in_, deadline);
  }
}

wire::Reply TCPStore::call(const wire::Request& request, std::chrono::milliseconds waitFor, const std::string& what) {
  std::lock_guard lock(mutex_);
  if (!fd_) connect();
  wire::Reply reply;
  try {
    reply = exchange(request, deadlineAfter(waitFor));
  } catch (const SocketError& e) {
    fd_.reset();
    in_.clear();
    fail("store: lost the connection to {} during {}: {}", hostPort(host_, port_), what, e.what());
  }
  if (reply.status == wire::Status::kError) fail("{}", reply.message);
  return reply;
}

namespace {

std::string keyText(const std::string& key) {
  KILN_CHECK(key.size() <= wire::kMaxKeyBytes, "store: a key of {} bytes exceeds {}", key.size(), wire::kMaxKeyBytes);
  return " of key " + key;
}

void checkKeys(const std::vector<std::string>& keys) {
  KILN_CHECK(keys.size() <= wire::kMaxKeys, "store: {} keys in one request exceed {}", keys.size(), wire::kMaxKeys);
  for (const std::string& k : keys) keyText(k);
}

/// How long a client waits for the answer to a get or wait of `timeout`.
std::chrono::milliseconds withSlack(std::chrono::milliseconds timeout) {
  const auto limit = std::chrono::milliseconds(wire::kMaxTimeoutMs);
  return std::min(timeout, limit) + kReplySlack;
}

uint64_t timeoutField(std::chrono::milliseconds timeout) {
  return static_cast<uint64_t>(std::clamp<int64_t>(timeout.count(), 0, wire::kMaxTimeoutMs));
}

}  // namespace

void TCPStore::set(const std::string& key, const Bytes& value) {
  KILN_CHECK(value.size() <= wire::kMaxValueBytes, "store: set of key {}: value of {} bytes exceeds {}", key,
             value.size(), wire::kMaxValueBytes);
  wire::Request r;
  r.type = Query::kSet;
  r.key = key;
  r.value = value;
  call(r, timeout(), "set" + keyText(key));
}

Bytes TCPStore::get(const std::string& key) {
  wire::Request r;
  r.type = Query::kGet;
  r.key = key;
  r.timeoutMs = timeoutField(timeout());
  wire::Reply reply = call(r, withSlack(timeout()), "get" + keyText(key));
  if (reply.status == wire::Status::kTimeout) fail("{}", waitTimeoutMessage(reply.keys, timeout()));
  return std::move(reply.value);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  wire::Request r;
  r.type = Query::kAdd;
  r.key = key;
  r.delta = delta;
  return call(r, timeout(), "add" + keyText(key)).number;
}

Bytes TCPStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  KILN_CHECK(expected.size() <= wire::kMaxValueBytes && desired.size() <= wire::kMaxValueBytes,
             "store: compareSet of key {}: value exceeds {} bytes", key, wire::kMaxValueBytes);
  wire::Request r;
  r.type = Query::kCompareSet;
  r.key = key;
  r.expected = expected;
  r.value = desired;
  return std::move(call(r, timeout(), "compareSet" + keyText(key)).value);
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  checkKeys(keys);
  wire::Request r;
  r.type = Query::kCheck;
  r.keys = keys;
  return call(r, timeout(), fmt::format("check of key(s) {}", fmt::join(keys, ", "))).flag;
}

bool TCPStore::deleteKey(const std::string& key) {
  wire::Request r;
  r.type = Query::kDeleteKey;
  r.key = key;
  return call(r, timeout(), "deleteKey" + keyText(key)).flag;
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) {
  checkKeys(keys);
  wire::Request r;
  r.type = Query::kWait;
  r.keys = keys;
  r.timeoutMs = timeoutField(t);
  const wire::Reply reply = call(r, withSlack(t), fmt::format("wait for key(s) {}", fmt::join(keys, ", ")));
  if (reply.status == wire::Status::kTimeout) fail("{}", waitTimeoutMessage(reply.keys, t));
}

int64_t TCPStore::numKeys() {
  wire::Request r;
  r.type = Query::kNumKeys;
  return call(r, timeout(), "numKeys").number;
}

}  // namespace kiln::runtime::dist
