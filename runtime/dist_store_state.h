// What the TCP store's server knows, without its sockets: the key-value
// table, and the clients parked in a `get` or `wait` until their keys are
// set or their deadline passes. The server (runtime/dist_tcp_store.cpp)
// feeds it the requests it parses and sends the replies it hands back; the
// fuzzer (tests/fuzz/store_fuzzer.cpp) drives it the same way with a made-up
// clock. A parked client is only an entry here, so a waiting `get` never
// holds up anyone else.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/dist_wire.h"

namespace kiln::runtime::dist {

class StoreState {
 public:
  using Clock = std::chrono::steady_clock;
  using ClientId = uint64_t;

  /// A reply to send to a client (the one that asked, or one it woke).
  struct Outgoing {
    ClientId client;
    wire::Query type;
    wire::Reply reply;
  };

  /// Handles one request of `client` at time `now`, appending the replies it
  /// makes to `out`: none when the client is now parked (get or wait of a
  /// missing key), else its own, plus those of the clients its write woke.
  /// A client must not send a request while it is parked.
  void handle(ClientId client, const wire::Request& request, Clock::time_point now, std::vector<Outgoing>& out);
  /// Times out the parked clients whose deadline is at or before `now`.
  void expire(Clock::time_point now, std::vector<Outgoing>& out);
  /// The earliest deadline of a parked client, or Clock::time_point::max().
  Clock::time_point nextDeadline() const;
  /// Whether `client` waits for a reply.
  bool parked(ClientId client) const { return waiters_.count(client) > 0; }
  /// Forgets a client that went away (its parked request, if any).
  void drop(ClientId client);

  size_t numKeys() const { return data_.size(); }
  size_t numParked() const { return waiters_.size(); }

 private:
  struct Waiter {
    wire::Query type;                  // kGet or kWait
    std::string key;                   // kGet: the key to return
    std::set<std::string> missing;     // keys not yet set
    std::vector<std::string> ordered;  // kWait: the keys, in the request's order
    Clock::time_point deadline;
  };

  void write(const std::string& key, Bytes value, std::vector<Outgoing>& out);
  void park(ClientId client, Waiter w);
  wire::Reply readyReply(const Waiter& w) const;
  void unpark(ClientId client);

  std::unordered_map<std::string, Bytes> data_;
  std::map<ClientId, Waiter> waiters_;
  std::unordered_map<std::string, std::set<ClientId>> waitingFor_;
  std::set<std::pair<Clock::time_point, ClientId>> deadlines_;
};

}  // namespace kiln::runtime::dist
