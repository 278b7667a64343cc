// The signature check of collectives: fingerprints, their comparison and
// the messages that name both ranks' calls (runtime/dist_fingerprint.h).
//
// Note [Collective fingerprints]
// A rank that calls all_reduce while its peer calls broadcast would wait for
// data that never comes: Gloo's algorithms use different slots, so both
// hang until the timeout and then report a read timeout that says nothing
// of the cause (PyTorch does this unless TORCH_DISTRIBUTED_DEBUG=DETAIL).
// kiln instead has every rank exchange a 96-byte fingerprint of its call
// before running it: sequence number, op, dtype, reduce op, root, element
// count, up to 6 dimensions, and a 64-bit FNV-1a hash of the full signature
// (every buffer's shape, so that all_gather's output lists are covered).
// Gloo exchanges it with one ring all-gather of 96 bytes per rank on the
// group's own context (runtime/dist_gloo.cpp): size - 1 rounds of one
// 96-byte message and one notification per rank. Measured on loopback
// (docs/distributed.md, "Signature checks"): a 4 KiB all-reduce at 2 ranks
// takes 0.26 ms without it and 0.30-0.34 ms with it, which is why it is on
// by default. Every rank sees
// every fingerprint and compares each with rank 0's, so every rank reports
// the same pair of calls, and no rank has started the mismatched call: the
// group stays usable. KILN_DIST_DEBUG=detail adds the full signatures,
// exchanged through the store (a set and size - 1 gets per call: store
// round trips, hence not the default), so that a mismatch hidden in the
// hash is shown in full; KILN_DIST_DEBUG=off skips both.
#include "runtime/dist_fingerprint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/error.h"

namespace kiln::runtime::dist {
namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<int64_t> shapeOf(const BufferRef& b) { return b.shape.empty() ? std::vector<int64_t>{b.numel} : b.shape; }

std::string listText(const std::vector<BufferRef>& list) {
  std::vector<std::string> parts;
  for (const BufferRef& b : list) parts.push_back(b.str());
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

bool sameCall(const Fingerprint& a, const Fingerprint& b) {
  if (a.magic != b.magic || a.kind != b.kind || a.dtype != b.dtype || a.op != b.op || a.ndim != b.ndim ||
      a.root != b.root || a.numel != b.numel || a.hash != b.hash || a.sequence != b.sequence)
    return false;
  for (int i = 0; i < Fingerprint::kMaxDims; ++i)
    if (a.dims[i] != b.dims[i]) return false;
  return true;
}

}  // namespace

const BufferRef* Call::subject() const {
  switch (kind) {
    case OpKind::allReduce:
    case OpKind::broadcast:
    case OpKind::allGather:
    case OpKind::allToAll:
    case OpKind::send: return inputs.empty() ? nullptr : &inputs[0];
    case OpKind::reduceScatter:
    case OpKind::recv: return outputs.empty() ? nullptr : &outputs[0];
    case OpKind::barrier: return nullptr;
  }
  return nullptr;
}

std::string Call::describe() const { return dist::describe(fingerprintOf(*this)); }

std::string Call::signature() const {
  std::string text = fmt::format("{}(in={}, out={}", opKindName(kind), listText(inputs), listText(outputs));
  if (kind == OpKind::allReduce || kind == OpKind::reduceScatter) text += fmt::format(", op={}", reduceOpName(op));
  if (kind == OpKind::broadcast) text += fmt::format(", root={}", root);
  if (!isCollective()) text += fmt::format(", peer={}, tag={}", peer, tag);
  return text + ")";
}

Fingerprint fingerprintOf(const Call& call) {
  Fingerprint fp;
  fp.kind = static_cast<uint8_t>(call.kind);
  fp.op = (call.kind == OpKind::allReduce || call.kind == OpKind::reduceScatter) ? static_cast<uint8_t>(call.op) : 0;
  fp.root = call.kind == OpKind::broadcast ? call.root : -1;
  fp.peer = call.isCollective() ? -1 : call.peer;
  fp.tag = call.isCollective() ? 0 : call.tag;
  fp.sequence = call.isCollective() ? call.sequence : 0;
  if (const BufferRef* s = call.subject()) {
    const std::vector<int64_t> shape = shapeOf(*s);
    fp.dtype = static_cast<uint8_t>(s->dtype);
    fp.numel = s->numel;
    fp.ndim = static_cast<uint8_t>(std::min<size_t>(shape.size(), 255));
    for (size_t i = 0; i < shape.size() && i < Fingerprint::kMaxDims; ++i) fp.dims[i] = shape[i];
  }
  fp.hash = fnv1a(call.signature());
  return fp;
}

std::string describe(const Fingerprint& fp) {
  if (fp.magic != Fingerprint::kMagic) return "a malformed fingerprint";
  if (fp.kind > static_cast<uint8_t>(OpKind::barrier)) return fmt::format("an unknown call (kind {})", fp.kind);
  const auto kind = static_cast<OpKind>(fp.kind);
  if (kind == OpKind::barrier) return "barrier()";
  std::string shape;
  if (fp.dtype < kNumDTypes) {
    shape = std::string(dtypeName(static_cast<DType>(fp.dtype)));
  } else {
    shape = fmt::format("dtype#{}", fp.dtype);
  }
  if (fp.ndim <= Fingerprint::kMaxDims) {
    shape += fmt::format("[{}]", fmt::join(fp.dims, fp.dims + fp.ndim, ","));
  } else {
    shape += fmt::format("[{} elements in {} dimensions]", fp.numel, fp.ndim);
  }
  const auto op = static_cast<ReduceOp>(fp.op);
  switch (kind) {
    case OpKind::allReduce:
    case OpKind::reduceScatter: return fmt::format("{}({}, {})", opKindName(kind), shape, reduceOpName(op));
    case OpKind::broadcast: return fmt::format("broadcast({}, root={})", shape, fp.root);
    case OpKind::allGather:
    case OpKind::allToAll: return fmt::format("{}({})", opKindName(kind), shape);
    case OpKind::send: return fmt::format("send({}, to={}, tag={})", shape, fp.peer, fp.tag);
    case OpKind::recv: return fmt::format("recv({}, from={}, tag={})", shape, fp.peer, fp.tag);
    case OpKind::barrier: break;
  }
  return "barrier()";
}

std::string findMismatch(const Call& mine, const std::vector<Fingerprint>& all) {
  const std::string_view op = opKindName(mine.kind);
  for (size_t r = 1; r < all.size(); ++r) {
    if (sameCall(all[0], all[r])) continue;
    const Fingerprint& a = all[0];
    const Fingerprint& b = all[r];
    if (a.magic != Fingerprint::kMagic || b.magic != Fingerprint::kMagic)
      return fmt::format("{}: rank {} sent a malformed call fingerprint at sequence {} (a different kiln version?)", op,
                         a.magic != Fingerprint::kMagic ? 0 : r, mine.sequence);
    if (a.sequence != b.sequence)
      return fmt::format(
          "{}: collective mismatch: rank 0 is at sequence {} calling {}, rank {} at sequence {} calling {} (a rank "
          "skipped or added a collective)",
          op, a.sequence, describe(a), r, b.sequence, describe(b));
    const std::string da = describe(a), db = describe(b);
    std::string text = fmt::format("{}: collective mismatch at sequence {}: rank 0 called {}, rank {} called {}", op,
                                   a.sequence, da, r, db);
    if (da == db)
      text += " (the shapes of their tensor lists differ; KILN_DIST_DEBUG=detail shows the whole signatures)";
    return text;
  }
  return {};
}

std::string findP2pMismatch(const Call& mine, int myRank, const Fingerprint& sent) {
  const Fingerprint want = fingerprintOf(mine);
  const bool same = sent.magic == Fingerprint::kMagic && sent.kind == static_cast<uint8_t>(OpKind::send) &&
                    sent.peer == myRank && sent.tag == want.tag && sent.dtype == want.dtype &&
                    sent.numel == want.numel && sent.ndim == want.ndim &&
                    std::equal(sent.dims, sent.dims + Fingerprint::kMaxDims, want.dims);
  if (same) return {};
  return fmt::format("recv: mismatch with rank {} (tag {}): rank {} called {}, rank {} called {}", mine.peer, mine.tag,
                     mine.peer, describe(sent), myRank, describe(want));
}

std::string signatureKey(uint64_t sequence, int rank) { return fmt::format("kiln/sig/{}/{}", sequence, rank); }

std::string exchangeSignatures(Store& store, const Call& mine, int rank, int size, std::chrono::milliseconds timeout,
                               int& missing) {
  missing = -1;
  auto key = [](uint64_t seq, int r) { return signatureKey(seq, r); };
  store.set(key(mine.sequence, rank), mine.signature());
  std::vector<std::string> signatures(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      signatures[static_cast<size_t>(r)] = mine.signature();
      continue;
    }
    try {
      store.wait({key(mine.sequence, r)}, timeout);
    } catch (const Error&) {
      missing = r;
      fail("{}: timed out after {} ms at sequence {} waiting for rank {}'s signature (KILN_DIST_DEBUG=detail)",
           opKindName(mine.kind), timeout.count(), mine.sequence, r);
    }
    const Bytes b = store.get(key(mine.sequence, r));
    signatures[static_cast<size_t>(r)] = std::string(b.begin(), b.end());
  }
  for (int r = 1; r < size; ++r)
    if (signatures[static_cast<size_t>(r)] != signatures[0])
      return fmt::format(
          "{}: collective mismatch at sequence {} (KILN_DIST_DEBUG=detail): rank 0 called {}, rank {} "
          "called {}",
          opKindName(mine.kind), mine.sequence, signatures[0], r, signatures[static_cast<size_t>(r)]);
  return {};
}

}  // namespace kiln::runtime::dist
