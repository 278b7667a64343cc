// The TCP store's wire format (runtime/dist_wire.h). A message is parsed
// twice: once to check its bounds and find its end without copying anything
// (so that a server that receives a large value piece by piece does
// constant work per piece), and once, when all of it is there, to decode it.
#include "runtime/dist_wire.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln::runtime::dist::wire {

const char* queryName(Query q) {
  switch (q) {
    case Query::kValidate: return "validate";
    case Query::kSet: return "set";
    case Query::kGet: return "get";
    case Query::kAdd: return "add";
    case Query::kCompareSet: return "compareSet";
    case Query::kCheck: return "check";
    case Query::kDeleteKey: return "deleteKey";
    case Query::kWait: return "wait";
    case Query::kNumKeys: return "numKeys";
  }
  return "unknown";
}

namespace {

// Reads fields from the bytes received so far. A read that runs past the
// end sets `incomplete` (with the size the message needs at least); one that
// breaks a bound sets `error`. Either stops every later read. With
// `decode` false nothing is copied.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, bool decode) : data_(data), size_(size), decode_(decode) {}

  bool ok() const { return !incomplete_ && error_.empty(); }

  template <typename T>
  T scalar() {
    T v{};
    if (!need(sizeof(T))) return v;
    uint8_t b[sizeof(T)];
    std::memcpy(b, data_ + pos_, sizeof(T));
    // Little-endian on the wire, whatever the host.
    std::make_unsigned_t<T> u = 0;
    for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<std::make_unsigned_t<T>>(b[i]) << (8 * i);
    v = static_cast<T>(u);
    pos_ += sizeof(T);
    return v;
  }

  /// A u32 length (at most `limit`) and that many bytes, into `out` when decoding.
  template <typename Container>
  void bytes(Container* out, size_t limit, const char* what) {
    const uint32_t n = scalar<uint32_t>();
    if (!ok()) return;
    if (n > limit) {
      error_ = fmt::format("{} length {} exceeds {}", what, n, limit);
      return;
    }
    if (!need(n)) return;
    if (decode_ && out) out->assign(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
  }

  void keyList(std::vector<std::string>* out) {
    const uint32_t n = scalar<uint32_t>();
    if (!ok()) return;
    if (n > kMaxKeys) {
      error_ = fmt::format("key count {} exceeds {}", n, kMaxKeys);
      return;
    }
    if (decode_ && out) out->clear();
    for (uint32_t i = 0; i < n && ok(); ++i) {
      std::string k;
      bytes(&k, kMaxKeyBytes, "key");
      if (decode_ && out && ok()) out->push_back(std::move(k));
    }
  }

  void fail(std::string message) {
    if (ok()) error_ = std::move(message);
  }

  ParseResult result() const {
    ParseResult r;
    if (!error_.empty()) {
      r.kind = ParseResult::kMalformed;
      r.error = error_;
    } else if (incomplete_) {
      r.kind = ParseResult::kIncomplete;
      r.size = needed_;
    } else {
      r.kind = ParseResult::kComplete;
      r.size = pos_;
    }
    return r;
  }

 private:
  bool need(size_t n) {
    if (!ok()) return false;
    if (size_ - pos_ >= n) return true;
    incomplete_ = true;
    needed_ = pos_ + n;
    return false;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  bool decode_;
  bool incomplete_ = false;
  size_t needed_ = 0;
  std::string error_;
};

uint64_t timeoutField(Cursor& c) {
  const uint64_t t = c.scalar<uint64_t>();
  if (c.ok() && t > kMaxTimeoutMs) c.fail(fmt::format("timeout {} ms exceeds {}", t, kMaxTimeoutMs));
  return t;
}

void readRequest(Cursor& c, Request* out) {
  const uint32_t magic = c.scalar<uint32_t>();
  if (!c.ok()) return;
  if (magic != kMagic) return c.fail(fmt::format("bad magic {:#010x} (expected {:#010x}, \"KLNS\")", magic, kMagic));
  const uint8_t type = c.scalar<uint8_t>();
  if (!c.ok()) return;
  if (type >= kNumQueries) return c.fail(fmt::format("unknown query type {}", type));
  Request scratch;
  Request& r = out ? *out : scratch;
  r.type = static_cast<Query>(type);
  switch (r.type) {
    case Query::kValidate: r.version = c.scalar<uint32_t>(); break;
    case Query::kSet:
      c.bytes(&r.key, kMaxKeyBytes, "key");
      c.bytes(&r.value, kMaxValueBytes, "value");
      break;
    case Query::kGet:
      c.bytes(&r.key, kMaxKeyBytes, "key");
      r.timeoutMs = timeoutField(c);
      break;
    case Query::kAdd:
      c.bytes(&r.key, kMaxKeyBytes, "key");
      r.delta = c.scalar<int64_t>();
      break;
    case Query::kCompareSet:
      c.bytes(&r.key, kMaxKeyBytes, "key");
      c.bytes(&r.expected, kMaxValueBytes, "value");
      c.bytes(&r.value, kMaxValueBytes, "value");
      break;
    case Query::kCheck: c.keyList(&r.keys); break;
    case Query::kDeleteKey: c.bytes(&r.key, kMaxKeyBytes, "key"); break;
    case Query::kWait:
      c.keyList(&r.keys);
      r.timeoutMs = timeoutField(c);
      break;
    case Query::kNumKeys: break;
  }
}

void readReply(Cursor& c, Query type, Reply* out) {
  const uint8_t status = c.scalar<uint8_t>();
  if (!c.ok()) return;
  Reply scratch;
  Reply& r = out ? *out : scratch;
  switch (status) {
    case static_cast<uint8_t>(Status::kOk): break;
    case static_cast<uint8_t>(Status::kTimeout):
      r.status = Status::kTimeout;
      if (type != Query::kGet && type != Query::kWait)
        return c.fail(fmt::format("a timeout reply to a {} request", queryName(type)));
      return c.keyList(&r.keys);
    case static_cast<uint8_t>(Status::kError):
      r.status = Status::kError;
      return c.bytes(&r.message, kMaxMessageBytes, "message");
    default: return c.fail(fmt::format("unknown reply status {}", status));
  }
  r.status = Status::kOk;
  switch (type) {
    case Query::kValidate: r.number = c.scalar<uint32_t>(); break;
    case Query::kSet:
    case Query::kWait: break;
    case Query::kGet:
    case Query::kCompareSet: c.bytes(&r.value, kMaxValueBytes, "value"); break;
    case Query::kAdd:
    case Query::kNumKeys: r.number = c.scalar<int64_t>(); break;
    case Query::kCheck:
    case Query::kDeleteKey: {
      const uint8_t f = c.scalar<uint8_t>();
      if (c.ok() && f > 1) return c.fail(fmt::format("flag byte {} is neither 0 nor 1", f));
      r.flag = f == 1;
      break;
    }
  }
}

template <typename Message, typename Read>
ParseResult parseTwice(const uint8_t* data, size_t size, Message& out, Read read) {
  Cursor scan(data, size, /*decode=*/false);
  read(scan, nullptr);
  ParseResult r = scan.result();
  if (r.kind != ParseResult::kComplete) return r;
  Cursor full(data, size, /*decode=*/true);
  Message m;
  read(full, &m);
  out = std::move(m);
  return full.result();
}

// --- encoding ---

template <typename T>
void put(Bytes& out, T v) {
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

template <typename Container>
void putBytes(Bytes& out, const Container& b) {
  put<uint32_t>(out, static_cast<uint32_t>(b.size()));
  out.insert(out.end(), b.begin(), b.end());
}

void putKeys(Bytes& out, const std::vector<std::string>& keys) {
  put<uint32_t>(out, static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) putBytes(out, k);
}

}  // namespace

ParseResult parseRequest(const uint8_t* data, size_t size, Request& out) {
  return parseTwice(data, size, out, [](Cursor& c, Request* r) { readRequest(c, r); });
}

ParseResult parseReply(Query type, const uint8_t* data, size_t size, Reply& out) {
  return parseTwice(data, size, out, [type](Cursor& c, Reply* r) { readReply(c, type, r); });
}

void encodeRequest(const Request& r, Bytes& out) {
  put<uint32_t>(out, kMagic);
  put<uint8_t>(out, static_cast<uint8_t>(r.type));
  switch (r.type) {
    case Query::kValidate: put<uint32_t>(out, r.version); break;
    case Query::kSet:
      putBytes(out, r.key);
      putBytes(out, r.value);
      break;
    case Query::kGet:
      putBytes(out, r.key);
      put<uint64_t>(out, r.timeoutMs);
      break;
    case Query::kAdd:
      putBytes(out, r.key);
      put<int64_t>(out, r.delta);
      break;
    case Query::kCompareSet:
      putBytes(out, r.key);
      putBytes(out, r.expected);
      putBytes(out, r.value);
      break;
    case Query::kCheck: putKeys(out, r.keys); break;
    case Query::kDeleteKey: putBytes(out, r.key); break;
    case Query::kWait:
      putKeys(out, r.keys);
      put<uint64_t>(out, r.timeoutMs);
      break;
    case Query::kNumKeys: break;
  }
}

void encodeReply(Query type, const Reply& r, Bytes& out) {
  put<uint8_t>(out, static_cast<uint8_t>(r.status));
  switch (r.status) {
    case Status::kTimeout: return putKeys(out, r.keys);
    case Status::kError: {
      const size_t n = std::min(r.message.size(), kMaxMessageBytes);
      return putBytes(out, std::string_view(r.message).substr(0, n));
    }
    case Status::kOk: break;
  }
  switch (type) {
    case Query::kValidate: put<uint32_t>(out, static_cast<uint32_t>(r.number)); break;
    case Query::kSet:
    case Query::kWait: break;
    case Query::kGet:
    case Query::kCompareSet: putBytes(out, r.value); break;
    case Query::kAdd:
    case Query::kNumKeys: put<int64_t>(out, r.number); break;
    case Query::kCheck:
    case Query::kDeleteKey: put<uint8_t>(out, r.flag ? 1 : 0); break;
  }
}

}  // namespace kiln::runtime::dist::wire
