// The TCP store over real sockets on 127.0.0.1, with ports the OS chooses:
// clients in threads and in forked processes meet through one server; a
// parked get holds up nobody else; timeouts name the key and the time;
// a client retries its connection until its timeout and then names the
// address; and garbage, truncated or oversized requests from a raw socket
// get an error reply and a closed connection while the next well-formed
// client is served. Every wait here is bounded (200-3000 ms).
#include "runtime/dist_tcp_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <thread>

#include "common/error_of.h"
#include "unit/runtime/dist_test_util.h"

namespace kiln::runtime::dist {
namespace {

using namespace std::chrono_literals;
using testutil::forkChild;
using testutil::rawConnect;
using testutil::rawReadAll;
using testutil::rawSend;
using testutil::waitChild;

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::unique_ptr<TCPStore> client(uint16_t port, std::chrono::milliseconds timeout = 2000ms) {
  return std::make_unique<TCPStore>("127.0.0.1", port, false, timeout);
}

TEST(DistTcpStore, ServerAndClientsShareOneTable) {
  TCPStore server("127.0.0.1", 0, /*isServer=*/true, 2000ms);
  ASSERT_NE(server.port(), 0);
  auto other = client(server.port());
  server.set("a", std::string("1"));
  EXPECT_EQ(other->getString("a"), "1");
  other->set("a", std::string("2"));  // overwrites
  EXPECT_EQ(server.getString("a"), "2");
  EXPECT_EQ(other->add("n", 5), 5);
  EXPECT_EQ(server.add("n", -2), 3);
  EXPECT_EQ(other->getString("n"), "3");
  EXPECT_EQ(server.compareSet("c", {}, bytes("x")), bytes("x"));
  EXPECT_EQ(other->compareSet("c", bytes("nope"), bytes("y")), bytes("x"));
  EXPECT_EQ(other->compareSet("c", bytes("x"), bytes("y")), bytes("y"));
  EXPECT_TRUE(other->check({"a", "n", "c"}));
  EXPECT_FALSE(other->check({"a", "missing"}));
  EXPECT_EQ(server.numKeys(), 3);
  EXPECT_TRUE(other->deleteKey("a"));
  EXPECT_FALSE(other->deleteKey("a"));
  EXPECT_EQ(server.numKeys(), 2);
  EXPECT_EQ(errorOf([&] { other->add("c", 1); }), "store: add to key c: its value is not a decimal integer");
  EXPECT_EQ(other->getString("n"), "3");  // the connection survives the error
}

TEST(DistTcpStore, AServerForAnotherHostNameListensOnEveryInterface) {
  // Not a loopback name: the server listens on every interface (as PyTorch's
  // does), so 127.0.0.1 reaches it too; the name itself is never resolved.
  TCPStoreServer server("node0.invalid", 0);
  auto c = client(server.port());
  c->set("k", std::string("v"));
  EXPECT_EQ(c->getString("k"), "v");
  EXPECT_EQ(server.numConnections(), 1u);
}

TEST(DistTcpStore, GetTimesOutNamingTheKeyAndTheTimeout) {
  TCPStore server("127.0.0.1", 0, true, 200ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(errorOf([&] { server.get("rank/1"); }), "store: timed out after 200 ms waiting for key(s) rank/1");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 1500ms);
}

TEST(DistTcpStore, WaitNamesOnlyTheMissingKeys) {
  TCPStore server("127.0.0.1", 0, true, 2000ms);
  server.set("y", std::string("1"));
  EXPECT_EQ(errorOf([&] {
              server.wait({"x", "y", "z"}, 150ms);
            }),
            "store: timed out after 150 ms waiting for key(s) x, z");
  server.set("x", std::string("1"));
  server.set("z", std::string("1"));
  EXPECT_EQ(errorOf([&] { server.wait({"x", "y", "z"}, 150ms); }), "no error");
}

TEST(DistTcpStore, AWaitingGetDoesNotHoldUpOtherClients) {
  TCPStore server("127.0.0.1", 0, true, 3000ms);
  auto waiter = client(server.port(), 3000ms);
  std::string got;
  std::thread t([&] { got = waiter->getString("late"); });
  std::this_thread::sleep_for(50ms);  // the get is parked on the server by now
  auto other = client(server.port());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) other->add("busy", 1);
  EXPECT_EQ(other->getString("busy"), "20");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  other->set("late", std::string("value"));
  t.join();
  EXPECT_EQ(got, "value");
}

TEST(DistTcpStore, ManyThreadsCountTogether) {
  TCPStore server("127.0.0.1", 0, true, 3000ms);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      auto c = client(server.port(), 3000ms);
      for (int k = 0; k < 20; ++k) c->add("count", 1);
      c->set(fmt::format("done/{}", i), std::string("1"));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.getString("count"), "320");
  EXPECT_EQ(server.numKeys(), 17);
}

TEST(DistTcpStore, ProcessesMeetThroughTheStore) {
  TCPStore server("127.0.0.1", 0, true, 3000ms);
  const uint16_t port = server.port();
  constexpr int kRanks = 3;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank)
    pids.push_back(forkChild([port, rank] {
      TCPStore c("127.0.0.1", port, false, 3000ms);
      c.set(fmt::format("rank/{}", rank), fmt::format("hello from {}", rank));
      c.add("joined", 1);
      for (int other = 0; other < kRanks; ++other)
        if (c.getString(fmt::format("rank/{}", other)) != fmt::format("hello from {}", other)) return 2;
      return 0;
    }));
  for (pid_t pid : pids) EXPECT_EQ(waitChild(pid), 0);
  EXPECT_EQ(server.getString("joined"), "3");
}

TEST(DistTcpStore, ConnectRetriesUntilItsTimeoutAndNamesTheAddress) {
  testutil::ReservedPort nobody;  // bound, not listening: refused
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(errorOf([&] { TCPStore c("127.0.0.1", nobody.port(), false, 300ms); }),
            fmt::format("store: cannot reach 127.0.0.1:{} after 300 ms: connection refused", nobody.port()));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 290ms);
}

TEST(DistTcpStore, AClientThatStartsFirstWaitsForTheServer) {
  testutil::ReservedPort reserved;
  const uint16_t port = reserved.port();
  std::string got;
  std::thread early([&] {
    TCPStore c("127.0.0.1", port, false, 3000ms);  // refused at first, then retried
    got = c.getString("greeting");
  });
  std::this_thread::sleep_for(100ms);
  reserved.release();
  TCPStore server("127.0.0.1", port, true, 3000ms);
  server.set("greeting", std::string("hi"));
  early.join();
  EXPECT_EQ(got, "hi");
}

TEST(DistTcpStore, GarbageGetsAnErrorAndACloseAndTheNextClientIsServed) {
  TCPStore server("127.0.0.1", 0, true, 2000ms);
  const int fd = rawConnect(server.port());
  ASSERT_GE(fd, 0);
  rawSend(fd, bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  const Bytes reply = rawReadAll(fd, closed);
  close(fd);
  EXPECT_TRUE(closed);
  wire::Reply r;
  ASSERT_EQ(wire::parseReply(wire::Query::kValidate, reply.data(), reply.size(), r).kind, wire::ParseResult::kComplete);
  EXPECT_EQ(r.status, wire::Status::kError);
  EXPECT_EQ(r.message, "store: malformed request: bad magic 0x20544547 (expected 0x534e4c4b, \"KLNS\")");
  auto c = client(server.port());
  c->set("after", std::string("ok"));
  EXPECT_EQ(server.getString("after"), "ok");
}

TEST(DistTcpStore, AnOversizedLengthIsRefusedBeforeItsBytesCome) {
  TCPStore server("127.0.0.1", 0, true, 2000ms);
  const int fd = rawConnect(server.port());
  ASSERT_GE(fd, 0);
  // A set whose value claims 60 MiB more than the bound: the server must not
  // wait for (or allocate) it.
  Bytes b;
  wire::Request set;
  set.type = wire::Query::kSet;
  set.key = "k";
  wire::encodeRequest(set, b);
  b.resize(b.size() - 4);
  for (uint32_t v = 124u << 20, i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  rawSend(fd, b);
  bool closed = false;
  const Bytes reply = rawReadAll(fd, closed, 2000ms);
  close(fd);
  EXPECT_TRUE(closed);
  wire::Reply r;
  ASSERT_EQ(wire::parseReply(wire::Query::kSet, reply.data(), reply.size(), r).kind, wire::ParseResult::kComplete);
  EXPECT_EQ(r.message, "store: malformed request: value length 130023424 exceeds 67108864");
  EXPECT_FALSE(server.check({"k"}));
}

TEST(DistTcpStore, TruncatedAndSilentClientsHoldUpNobody) {
  TCPStore server("127.0.0.1", 0, true, 2000ms);
  // One sends half a set and vanishes; one sends three bytes and stays.
  Bytes b;
  wire::Request set;
  set.type = wire::Query::kSet;
  set.key = "half";
  set.value = Bytes(1000, 'v');
  wire::encodeRequest(set, b);
  const int gone = rawConnect(server.port());
  rawSend(gone, Bytes(b.begin(), b.begin() + 500));
  close(gone);
  const int silent = rawConnect(server.port());
  rawSend(silent, Bytes(b.begin(), b.begin() + 3));
  // And one sends a get and never reads its reply.
  const int deaf = rawConnect(server.port());
  wire::Request get;
  get.type = wire::Query::kGet;
  get.key = "k";
  get.timeoutMs = 100000;
  Bytes g;
  wire::encodeRequest(get, g);
  rawSend(deaf, g);
  auto c = client(server.port());
  const auto t0 = std::chrono::steady_clock::now();
  c->set("k", Bytes(4 << 20, 'x'));  // wakes the deaf get, whose reply it never reads
  EXPECT_EQ(c->get("k").size(), size_t{4} << 20);
  EXPECT_FALSE(c->check({"half"}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  close(silent);
  close(deaf);
}

TEST(DistTcpStore, StoppingTheServerFailsAWaitingClientAtOnce) {
  auto server = std::make_unique<TCPStoreServer>("127.0.0.1", 0);
  auto c = client(server->port(), 3000ms);
  std::string error;
  std::thread t([&] { error = errorOf([&] { c->get("never"); }); });
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  server.reset();  // joins its thread, closes every connection
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  EXPECT_TRUE(std::regex_match(error, std::regex("store: lost the connection to 127\\.0\\.0\\.1:[0-9]+ during get of "
                                                 "key never: (closed by the peer|connection reset by peer)")))
      << error;
}

TEST(DistTcpStore, PrefixStoresShareTheServerWithoutSharingKeys) {
  auto base = std::make_shared<TCPStore>("127.0.0.1", 0, true, 500ms);
  PrefixStore a("group/a", base), b("group/b", base);
  a.set("k", bytes("1"));
  b.set("k", bytes("2"));
  EXPECT_EQ(a.getString("k"), "1");
  EXPECT_EQ(b.getString("k"), "2");
  EXPECT_EQ(base->getString("group/a/k"), "1");
  EXPECT_EQ(errorOf([&] { a.get("only-in-b"); }), "store: timed out after 500 ms waiting for key(s) group/a/only-in-b");
}

}  // namespace
}  // namespace kiln::runtime::dist
