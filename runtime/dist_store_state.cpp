// The TCP store server's table and parked clients (runtime/dist_store_state.h).
// The semantics of each operation are the ones every store shares
// (addTo, compareSetDecision in runtime/dist_store.h), so a TCPStore answers
// exactly as a HashStore does.
#include "runtime/dist_store_state.h"

#include "runtime/error.h"

namespace kiln::runtime::dist {

using wire::Query;
using wire::Reply;
using wire::Request;
using wire::Status;

namespace {

StoreState::Clock::time_point deadlineAfter(StoreState::Clock::time_point now, uint64_t timeoutMs) {
  // timeoutMs is bounded by wire::kMaxTimeoutMs, far below the clock's range.
  return now + std::chrono::milliseconds(static_cast<int64_t>(timeoutMs));
}

}  // namespace

void StoreState::handle(ClientId client, const Request& request, Clock::time_point now, std::vector<Outgoing>& out) {
  KILN_ASSERT(!parked(client), "a store client sent a request while waiting for a reply");
  Reply reply;
  switch (request.type) {
    case Query::kValidate:
      if (request.version != wire::kVersion) {
        reply.status = Status::kError;
        reply.message = fmt::format("store: the client speaks protocol version {}, this server version {}",
                                    request.version, wire::kVersion);
      }
      reply.number = wire::kVersion;
      break;
    case Query::kSet: write(request.key, request.value, out); break;
    case Query::kGet:
    case Query::kWait: {
      Waiter w;
      w.type = request.type;
      if (request.type == Query::kGet) {
        w.key = request.key;
        w.ordered = {request.key};
      } else {
        w.ordered = request.keys;
      }
      for (const std::string& k : w.ordered)
        if (!data_.count(k)) w.missing.insert(k);
      w.deadline = deadlineAfter(now, request.timeoutMs);
      if (w.missing.empty()) {
        reply = readyReply(w);
        break;
      }
      if (w.deadline <= now) {
        reply.status = Status::kTimeout;
        for (const std::string& k : w.ordered)
          if (w.missing.count(k)) reply.keys.push_back(k);
        break;
      }
      park(client, std::move(w));
      return;
    }
    case Query::kAdd: {
      auto it = data_.find(request.key);
      Bytes updated;
      try {
        reply.number = addTo(request.key, it == data_.end() ? nullptr : &it->second, request.delta, updated);
      } catch (const Error& e) {
        reply.status = Status::kError;
        reply.message = e.what();
        break;
      }
      write(request.key, std::move(updated), out);
      break;
    }
    case Query::kCompareSet: {
      auto it = data_.find(request.key);
      if (compareSetDecision(it == data_.end() ? nullptr : &it->second, request.expected, request.value, reply.value))
        write(request.key, request.value, out);
      break;
    }
    case Query::kCheck:
      reply.flag = true;
      for (const std::string& k : request.keys)
        if (!data_.count(k)) reply.flag = false;
      break;
    case Query::kDeleteKey: reply.flag = data_.erase(request.key) > 0; break;
    case Query::kNumKeys: reply.number = static_cast<int64_t>(data_.size()); break;
  }
  out.push_back({client, request.type, std::move(reply)});
}

void StoreState::write(const std::string& key, Bytes value, std::vector<Outgoing>& out) {
  data_[key] = std::move(value);
  auto it = waitingFor_.find(key);
  if (it == waitingFor_.end()) return;
  const std::set<ClientId> clients = std::move(it->second);
  waitingFor_.erase(it);
  for (ClientId c : clients) {
    Waiter& w = waiters_.at(c);
    w.missing.erase(key);
    if (!w.missing.empty()) continue;
    out.push_back({c, w.type, readyReply(w)});
    unpark(c);
  }
}

Reply StoreState::readyReply(const Waiter& w) const {
  Reply r;
  if (w.type == Query::kGet) r.value = data_.at(w.key);
  return r;
}

void StoreState::park(ClientId client, Waiter w) {
  for (const std::string& k : w.missing) waitingFor_[k].insert(client);
  deadlines_.insert({w.deadline, client});
  waiters_.emplace(client, std::move(w));
}

void StoreState::unpark(ClientId client) {
  auto it = waiters_.find(client);
  if (it == waiters_.end()) return;
  for (const std::string& k : it->second.missing) {
    auto wf = waitingFor_.find(k);
    if (wf == waitingFor_.end()) continue;
    wf->second.erase(client);
    if (wf->second.empty()) waitingFor_.erase(wf);
  }
  deadlines_.erase({it->second.deadline, client});
  waiters_.erase(it);
}

void StoreState::expire(Clock::time_point now, std::vector<Outgoing>& out) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const ClientId c = deadlines_.begin()->second;
    const Waiter& w = waiters_.at(c);
    Reply r;
    r.status = Status::kTimeout;
    for (const std::string& k : w.ordered)
      if (w.missing.count(k)) r.keys.push_back(k);
    out.push_back({c, w.type, std::move(r)});
    unpark(c);
  }
}

StoreState::Clock::time_point StoreState::nextDeadline() const {
  return deadlines_.empty() ? Clock::time_point::max() : deadlines_.begin()->first;
}

void StoreState::drop(ClientId client) { unpark(client); }

}  // namespace kiln::runtime::dist
