// The TCP store's wire format (docs/distributed.md, "The store and its wire
// format"): how a request and its reply are laid out in bytes, and a parser
// that works on however many bytes have arrived so far. It is shared by the
// server (runtime/dist_tcp_store.cpp), the client and the fuzzer
// (tests/fuzz/store_fuzzer.cpp), and has no sockets in it. Every length is
// bounded before anything is allocated for it, so a malformed, truncated or
// hostile message is answered with an error, never a crash, a huge
// allocation or a parser that waits for bytes that no bound allows.
//
// A request: the magic bytes "KLNS", a u8 query type, then the fields of
// that type. Integers are little-endian; a key is a u32 length (at most
// kMaxKeyBytes) and its bytes, a value a u32 length (at most kMaxValueBytes)
// and its bytes, a key list a u32 count (at most kMaxKeys) and that many keys.
// A reply: a u8 status, then for kOk the fields of the query type, for
// kTimeout the key list still missing, for kError a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dist_store.h"

namespace kiln::runtime::dist::wire {

/// "KLNS" as it appears on the wire (little-endian u32).
inline constexpr uint32_t kMagic = 0x534E4C4Bu;
/// The protocol version a client announces in kValidate.
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kMaxKeyBytes = 64 * 1024;
inline constexpr size_t kMaxValueBytes = 64 * 1024 * 1024;
inline constexpr size_t kMaxKeys = 4096;
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
/// Longest timeout a request can carry (about 115 days), so that deadlines
/// computed from it never overflow.
inline constexpr uint64_t kMaxTimeoutMs = 10'000'000'000ull;
/// Bytes a server buffers for one request before it is complete: the
/// largest request the bounds above allow (a compareSet with two values).
inline constexpr size_t kMaxRequestBytes = 2 * kMaxValueBytes + kMaxKeyBytes + 64;

/// The query types; the numbers are the wire's.
enum class Query : uint8_t {
  kValidate = 0,    // u32 version                      -> u32 version
  kSet = 1,         // key, value                        -> (nothing)
  kGet = 2,         // key, u64 timeout ms               -> value
  kAdd = 3,         // key, i64 delta                    -> i64 new value
  kCompareSet = 4,  // key, value expected, value desired -> value
  kCheck = 5,       // key list                          -> u8 all set
  kDeleteKey = 6,   // key                               -> u8 was there
  kWait = 7,        // key list, u64 timeout ms          -> (nothing)
  kNumKeys = 8,     // (nothing)                         -> i64 count
};
inline constexpr uint8_t kNumQueries = 9;
const char* queryName(Query q);

/// A reply's first byte.
enum class Status : uint8_t {
  kOk = 0,
  kTimeout = 1,  // get and wait: the key list still missing
  kError = 2,    // a message; after a malformed request the server closes
};

struct Request {
  Query type = Query::kValidate;
  std::string key;                // set, get, add, compareSet, deleteKey
  Bytes value;                    // set: the value; compareSet: desired
  Bytes expected;                 // compareSet
  std::vector<std::string> keys;  // check, wait
  int64_t delta = 0;              // add
  uint64_t timeoutMs = 0;         // get, wait
  uint32_t version = kVersion;    // validate
};

struct Reply {
  Status status = Status::kOk;
  Bytes value;                    // get, compareSet
  int64_t number = 0;             // add, numKeys; validate: the version
  bool flag = false;              // check, deleteKey
  std::vector<std::string> keys;  // timeout: the keys still missing
  std::string message;            // error
};

/// What a parser makes of the bytes received so far.
struct ParseResult {
  enum Kind { kComplete, kIncomplete, kMalformed } kind = kIncomplete;
  /// kComplete: the bytes the message took; kIncomplete: the fewest bytes
  /// the message can take (so a caller need not try again before that).
  size_t size = 0;
  std::string error;  // kMalformed: what is wrong, e.g. "key length 70000 exceeds 65536"
};

/// Parses one request from the start of `data`; fills `out` only when complete.
ParseResult parseRequest(const uint8_t* data, size_t size, Request& out);
/// Parses the reply to a request of type `type` from the start of `data`.
ParseResult parseReply(Query type, const uint8_t* data, size_t size, Reply& out);

/// Appends the encoding of `r` to `out`.
void encodeRequest(const Request& r, Bytes& out);
void encodeReply(Query type, const Reply& r, Bytes& out);

}  // namespace kiln::runtime::dist::wire
