// One contract, every store (runtime/dist_store.h): HashStore, TCPStore
// and FileStore answer each operation alike: set overwrites and wakes a
// waiting get; add keeps a decimal counter and refuses other values naming
// the key; compareSet follows PyTorch's compare_set in all four cases;
// check, deleteKey and numKeys agree; a get or wait that times out names
// the keys and the timeout; a PrefixStore over each keeps groups apart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "common/error_of.h"
#include "runtime/dist_file_store.h"
#include "runtime/dist_tcp_store.h"

namespace kiln::runtime::dist {
namespace {

using namespace std::chrono_literals;

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct StoreKind {
  std::string name;
  /// A store, and a second handle on the same table (another client, another open of the file).
  std::function<std::pair<std::shared_ptr<Store>, std::shared_ptr<Store>>(std::chrono::milliseconds)> make;
};

std::string tempPath(const std::string& what) {
  return (std::filesystem::temp_directory_path() / fmt::format("kiln-{}-{}-{}", what, getpid(), rand())).string();
}

std::vector<StoreKind> kinds() {
  return {
      {"hash",
       [](std::chrono::milliseconds t) {
         auto s = std::make_shared<HashStore>(t);
         return std::make_pair(std::shared_ptr<Store>(s), std::shared_ptr<Store>(s));
       }},
      {"tcp",
       [](std::chrono::milliseconds t) {
         auto s = std::make_shared<TCPStore>("127.0.0.1", 0, true, t);
         auto c = std::make_shared<TCPStore>("127.0.0.1", s->port(), false, t);
         return std::make_pair(std::shared_ptr<Store>(s), std::shared_ptr<Store>(c));
       }},
      {"file",
       [](std::chrono::milliseconds t) {
         const std::string path = tempPath("store");
         auto s = std::make_shared<FileStore>(path, t);
         auto c = std::make_shared<FileStore>(path, t);
         return std::make_pair(std::shared_ptr<Store>(s), std::shared_ptr<Store>(c));
       }},
  };
}

class DistStoreSemantics : public testing::TestWithParam<StoreKind> {};

TEST_P(DistStoreSemantics, SetGetAddCheckDelete) {
  auto [a, b] = GetParam().make(2000ms);
  a->set("k", bytes("v1"));
  EXPECT_EQ(b->getString("k"), "v1");
  b->set("k", bytes("v2"));
  EXPECT_EQ(a->getString("k"), "v2");
  a->set("empty", Bytes{});
  EXPECT_EQ(b->get("empty"), Bytes{});
  EXPECT_EQ(a->add("n", 3), 3);  // a missing key counts from 0
  EXPECT_EQ(b->add("n", -10), -7);
  EXPECT_EQ(a->getString("n"), "-7");
  EXPECT_EQ(errorOf([&] { b->add("k", 1); }), "store: add to key k: its value is not a decimal integer");
  a->set("big", bytes("9223372036854775807"));
  EXPECT_EQ(errorOf([&] { b->add("big", 1); }),
            "store: add to key big: 9223372036854775807 + 1 overflows a 64-bit integer");
  EXPECT_EQ(a->add("big", -1), 9223372036854775806);
  EXPECT_TRUE(b->deleteKey("big"));
  EXPECT_TRUE(b->check({"k", "n", "empty"}));
  EXPECT_FALSE(b->check({"k", "nope"}));
  EXPECT_EQ(a->numKeys(), 3);
  EXPECT_TRUE(b->deleteKey("k"));
  EXPECT_FALSE(a->deleteKey("k"));
  EXPECT_FALSE(a->check({"k"}));
  EXPECT_EQ(b->numKeys(), 2);
}

TEST_P(DistStoreSemantics, CompareSetIsPyTorchs) {
  auto [a, b] = GetParam().make(2000ms);
  // Missing key, expected not empty: nothing stored, `expected` returned.
  EXPECT_EQ(a->compareSet("c", bytes("x"), bytes("y")), bytes("x"));
  EXPECT_FALSE(b->check({"c"}));
  // Missing key, expected empty: stored.
  EXPECT_EQ(a->compareSet("c", {}, bytes("first")), bytes("first"));
  // Present, equal: replaced.
  EXPECT_EQ(b->compareSet("c", bytes("first"), bytes("second")), bytes("second"));
  // Present, different: kept and returned.
  EXPECT_EQ(a->compareSet("c", bytes("first"), bytes("third")), bytes("second"));
  EXPECT_EQ(b->getString("c"), "second");
}

TEST_P(DistStoreSemantics, GetWaitsForAnotherHandleAndTimesOutNamingTheKey) {
  auto [a, b] = GetParam().make(1500ms);
  std::thread writer([b = b] {
    std::this_thread::sleep_for(50ms);
    b->set("late", bytes("here"));
  });
  EXPECT_EQ(a->getString("late"), "here");
  writer.join();
  a->setTimeout(150ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(errorOf([&] { a->get("never"); }), "store: timed out after 150 ms waiting for key(s) never");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 140ms);
  EXPECT_EQ(errorOf([&] {
              a->wait({"late", "never", "nor"}, 100ms);
            }),
            "store: timed out after 100 ms waiting for key(s) never, nor");
  EXPECT_EQ(errorOf([&] { a->wait({"late"}, 100ms); }), "no error");
}

TEST_P(DistStoreSemantics, PrefixStoresKeepGroupsApart) {
  auto [a, b] = GetParam().make(300ms);
  PrefixStore ga("g/a", a), gb("g/b", b);
  ga.set("k", bytes("1"));
  gb.set("k", bytes("2"));
  EXPECT_EQ(ga.add("n", 1), 1);
  EXPECT_EQ(gb.add("n", 1), 1);
  EXPECT_EQ(ga.getString("k"), "1");
  EXPECT_EQ(gb.getString("k"), "2");
  EXPECT_TRUE(ga.check({"k", "n"}));
  EXPECT_TRUE(ga.deleteKey("k"));
  EXPECT_TRUE(gb.check({"k"}));
  EXPECT_EQ(a->numKeys(), 3);
  EXPECT_EQ(errorOf([&] { ga.get("k"); }), "store: timed out after 300 ms waiting for key(s) g/a/k");
}

INSTANTIATE_TEST_SUITE_P(Stores, DistStoreSemantics, testing::ValuesIn(kinds()),
                         [](const testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

}  // namespace
}  // namespace kiln::runtime::dist
