// The TCP store's wire format (runtime/dist_wire.h) and its server's table
// of parked clients (runtime/dist_store_state.h), without sockets: every
// request and reply survives encode then parse; every prefix of a message
// is incomplete, never malformed or complete; bounds and bad bytes are
// rejected with a message saying which; a parked get is woken by a set,
// times out at its deadline naming the keys still missing, and is forgotten
// when its client goes.
#include "runtime/dist_wire.h"

#include <gtest/gtest.h>

#include "runtime/dist_store_state.h"

namespace kiln::runtime::dist {
namespace {

using wire::ParseResult;
using wire::Query;

std::vector<wire::Request> sampleRequests() {
  std::vector<wire::Request> rs;
  auto make = [&](Query q) -> wire::Request& {
    rs.emplace_back();
    rs.back().type = q;
    return rs.back();
  };
  make(Query::kValidate).version = 7;
  auto& set = make(Query::kSet);
  set.key = "a/key";
  set.value = {0, 1, 2, 255};
  auto& get = make(Query::kGet);
  get.key = "k";
  get.timeoutMs = 123456789;
  auto& add = make(Query::kAdd);
  add.key = "counter";
  add.delta = -42;
  auto& cas = make(Query::kCompareSet);
  cas.key = "c";
  cas.expected = {'o', 'l', 'd'};
  cas.value = {'n', 'e', 'w'};
  make(Query::kCheck).keys = {"x", "", "y/z"};
  make(Query::kDeleteKey).key = "gone";
  auto& wait = make(Query::kWait);
  wait.keys = {"p", "q"};
  wait.timeoutMs = 5;
  make(Query::kNumKeys);
  return rs;
}

TEST(DistWire, EveryRequestRoundTrips) {
  for (const wire::Request& r : sampleRequests()) {
    Bytes bytes;
    wire::encodeRequest(r, bytes);
    bytes.push_back(0xEE);  // the start of the next message is left alone
    wire::Request back;
    const ParseResult p = wire::parseRequest(bytes.data(), bytes.size(), back);
    ASSERT_EQ(p.kind, ParseResult::kComplete) << wire::queryName(r.type) << ": " << p.error;
    EXPECT_EQ(p.size, bytes.size() - 1) << wire::queryName(r.type);
    EXPECT_EQ(back.type, r.type);
    EXPECT_EQ(back.key, r.key);
    EXPECT_EQ(back.value, r.value);
    EXPECT_EQ(back.expected, r.expected);
    EXPECT_EQ(back.keys, r.keys);
    EXPECT_EQ(back.delta, r.delta);
    EXPECT_EQ(back.timeoutMs, r.timeoutMs);
    if (r.type == Query::kValidate) {
      EXPECT_EQ(back.version, 7u);
    }
  }
}

TEST(DistWire, EveryPrefixIsIncompleteWithAHintWithinTheMessage) {
  for (const wire::Request& r : sampleRequests()) {
    Bytes bytes;
    wire::encodeRequest(r, bytes);
    for (size_t n = 0; n < bytes.size(); ++n) {
      wire::Request out;
      const ParseResult p = wire::parseRequest(bytes.data(), n, out);
      ASSERT_EQ(p.kind, ParseResult::kIncomplete) << wire::queryName(r.type) << " cut at " << n;
      EXPECT_GT(p.size, n);
      EXPECT_LE(p.size, bytes.size());
    }
  }
}

TEST(DistWire, RepliesRoundTrip) {
  wire::Reply ok;
  ok.value = {9, 8, 7};
  ok.number = -5;
  ok.flag = true;
  for (uint8_t t = 0; t < wire::kNumQueries; ++t) {
    const Query q = static_cast<Query>(t);
    Bytes bytes;
    wire::encodeReply(q, ok, bytes);
    wire::Reply back;
    ASSERT_EQ(wire::parseReply(q, bytes.data(), bytes.size(), back).kind, ParseResult::kComplete);
    if (q == Query::kGet || q == Query::kCompareSet) {
      EXPECT_EQ(back.value, ok.value);
    } else if (q == Query::kAdd || q == Query::kNumKeys) {
      EXPECT_EQ(back.number, -5);
    } else if (q == Query::kCheck || q == Query::kDeleteKey) {
      EXPECT_TRUE(back.flag);
    }
  }
  wire::Reply timeout;
  timeout.status = wire::Status::kTimeout;
  timeout.keys = {"a", "b"};
  Bytes bytes;
  wire::encodeReply(Query::kWait, timeout, bytes);
  wire::Reply back;
  ASSERT_EQ(wire::parseReply(Query::kWait, bytes.data(), bytes.size(), back).kind, ParseResult::kComplete);
  EXPECT_EQ(back.status, wire::Status::kTimeout);
  EXPECT_EQ(back.keys, timeout.keys);
  // A timeout is no answer to a set: a broken server, not a hang.
  EXPECT_EQ(wire::parseReply(Query::kSet, bytes.data(), bytes.size(), back).kind, ParseResult::kMalformed);
}

ParseResult parseBytes(const Bytes& b) {
  wire::Request out;
  return wire::parseRequest(b.data(), b.size(), out);
}

Bytes header(uint8_t type) {
  Bytes b;
  wire::Request r;
  r.type = Query::kNumKeys;
  wire::encodeRequest(r, b);
  b.back() = type;
  return b;
}

void putU32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

TEST(DistWire, MalformedRequestsNameWhatIsWrong) {
  EXPECT_EQ(parseBytes({'G', 'E', 'T', ' ', '/'}).error, "bad magic 0x20544547 (expected 0x534e4c4b, \"KLNS\")");
  EXPECT_EQ(parseBytes(header(200)).error, "unknown query type 200");
  // Bounds are checked from the length field alone, before the bytes come.
  Bytes hugeKey = header(static_cast<uint8_t>(Query::kSet));
  putU32(hugeKey, 1u << 30);
  EXPECT_EQ(parseBytes(hugeKey).kind, ParseResult::kMalformed);
  EXPECT_EQ(parseBytes(hugeKey).error, "key length 1073741824 exceeds 65536");
  Bytes hugeValue = header(static_cast<uint8_t>(Query::kSet));
  putU32(hugeValue, 1);
  hugeValue.push_back('k');
  putU32(hugeValue, 0xFFFFFFFFu);
  EXPECT_EQ(parseBytes(hugeValue).error, "value length 4294967295 exceeds 67108864");
  Bytes manyKeys = header(static_cast<uint8_t>(Query::kWait));
  putU32(manyKeys, 1u << 20);
  EXPECT_EQ(parseBytes(manyKeys).error, "key count 1048576 exceeds 4096");
  wire::Request longWait;
  longWait.type = Query::kGet;
  longWait.timeoutMs = ~0ull;
  Bytes b;
  wire::encodeRequest(longWait, b);
  EXPECT_EQ(parseBytes(b).kind, ParseResult::kMalformed);
  EXPECT_NE(parseBytes(b).error.find("timeout"), std::string::npos);
}

// --- the server's table ---

using Clock = StoreState::Clock;

wire::Request req(Query q, std::string key = "", uint64_t timeoutMs = 0) {
  wire::Request r;
  r.type = q;
  r.key = std::move(key);
  r.timeoutMs = timeoutMs;
  return r;
}

TEST(DistStoreState, ParkedGetIsWokenBySetAndOthersAreServedMeanwhile) {
  StoreState s;
  std::vector<StoreState::Outgoing> out;
  const auto t0 = Clock::now();
  s.handle(1, req(Query::kGet, "k", 1000), t0, out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(s.parked(1));
  s.handle(2, req(Query::kNumKeys), t0, out);  // another client is answered at once
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].client, 2u);
  out.clear();
  wire::Request set = req(Query::kSet, "k");
  set.value = {'v'};
  s.handle(2, set, t0, out);
  ASSERT_EQ(out.size(), 2u);  // the woken get, then the set's own reply
  EXPECT_EQ(out[0].client, 1u);
  EXPECT_EQ(out[0].type, Query::kGet);
  EXPECT_EQ(out[0].reply.value, Bytes{'v'});
  EXPECT_EQ(out[1].client, 2u);
  EXPECT_FALSE(s.parked(1));
}

TEST(DistStoreState, WaitTimesOutAtItsDeadlineNamingTheMissingKeys) {
  StoreState s;
  std::vector<StoreState::Outgoing> out;
  const auto t0 = Clock::now();
  wire::Request set = req(Query::kSet, "b");
  s.handle(3, set, t0, out);
  out.clear();
  wire::Request wait = req(Query::kWait, "", 200);
  wait.keys = {"c", "b", "a"};
  s.handle(1, wait, t0, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.nextDeadline(), t0 + std::chrono::milliseconds(200));
  s.expire(t0 + std::chrono::milliseconds(199), out);
  EXPECT_TRUE(out.empty());
  s.expire(t0 + std::chrono::milliseconds(200), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].reply.status, wire::Status::kTimeout);
  EXPECT_EQ(out[0].reply.keys, (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(s.numParked(), 0u);
  EXPECT_EQ(s.nextDeadline(), Clock::time_point::max());
}

TEST(DistStoreState, ADroppedClientIsForgottenAndAddErrorsKeepTheTable) {
  StoreState s;
  std::vector<StoreState::Outgoing> out;
  const auto t0 = Clock::now();
  s.handle(1, req(Query::kGet, "k", 1000), t0, out);
  s.drop(1);
  EXPECT_EQ(s.numParked(), 0u);
  wire::Request set = req(Query::kSet, "k");
  set.value = {'x'};
  s.handle(2, set, t0, out);
  ASSERT_EQ(out.size(), 1u);  // nobody else to wake
  out.clear();
  wire::Request add = req(Query::kAdd, "k");
  add.delta = 1;
  s.handle(2, add, t0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].reply.status, wire::Status::kError);
  EXPECT_EQ(out[0].reply.message, "store: add to key k: its value is not a decimal integer");
  EXPECT_EQ(s.numKeys(), 1u);
}

}  // namespace
}  // namespace kiln::runtime::dist
