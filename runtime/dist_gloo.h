// Internal to the Gloo backend (runtime/dist_gloo.cpp, dist_gloo_ops.cpp):
// the collectives of one Gloo context on host memory, with the algorithm
// cache of Note [Cached Gloo algorithms]. Compiled only with Gloo
// (KILN_HAVE_GLOO); nothing outside the backend includes it.
#pragma once

#ifdef KILN_HAVE_GLOO

#include <gloo/algorithm.h>
#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/dist_fingerprint.h"
#include "runtime/dist_process_group.h"

namespace kiln::runtime::dist::gloo_backend {

/// Runs a group's collectives on host memory over its Gloo context (null
/// for a group of one rank, whose collectives are local copies). Used by
/// the group's worker thread only.
class GlooOps {
 public:
  /// Builds the fingerprint all-gathers and the barrier, in that order, as
  /// every rank does (their slots come from the context in order).
  GlooOps(std::shared_ptr<::gloo::Context> context, int rank, int size, int64_t maxElementsPerCall,
          std::chrono::milliseconds timeout);
  ~GlooOps();

  /// The build of the cached algorithms run() of `call` over these host
  /// pointers would reuse, 0 for none (what this rank says in its
  /// fingerprint's cachedBuild).
  uint32_t cachedBuild(const Call& call, const std::vector<void*>& in) const;
  /// Every rank's fingerprint, in rank order (Note [Collective fingerprints]).
  std::vector<Fingerprint> exchange(const Fingerprint& mine);
  /// Runs `call` on host memory: `in` and `out` hold the host address of
  /// each of call.inputs and call.outputs (the same address where they are
  /// the same buffer). `useCache`: every rank has the algorithms cached;
  /// `mayCache`: keep newly built ones for later calls.
  void run(const Call& call, const std::vector<void*>& in, const std::vector<void*>& out, bool useCache, bool mayCache);

 private:
  /// What identifies a cached algorithm: kind, dtype, reduce op, root,
  /// element count and the host addresses it works on.
  using Key = std::tuple<int, int, int, int, int64_t, std::vector<void*>>;
  struct Entry {
    std::unique_ptr<::gloo::Algorithm> algorithm;
    std::vector<uint8_t> staging;  ///< all_gather's output, reduce_scatter's packed input
    uint64_t age = 0;
    bool large = false;  ///< above kCacheBytes (an all_reduce)
    uint32_t build = 0;  ///< the low 32 bits of the sequence number of the call that built it
  };
  /// The key of `call`, or nothing when it is not cached (too large, split
  /// in pieces, or a kind that is not).
  std::optional<Key> keyOf(const Call& call, const std::vector<void*>& in) const;
  /// The entry for `call`: the cached one when `useCache`, else a new one
  /// (kept when `mayCache`, replacing the oldest past kMaxEntries).
  Entry& entryFor(const Call& call, const std::vector<void*>& in, bool useCache, bool mayCache, Entry& scratch);
  /// A new algorithm for `count` elements at `data` (all-reduce, broadcast),
  /// or for all-gather / reduce-scatter over `entry.staging`.
  void build(Entry& entry, const Call& call, void* data, int64_t count);

  void runLocal(const Call& call, const std::vector<void*>& in, const std::vector<void*>& out);
  void allReduce(const Call& call, void* data, bool useCache, bool mayCache);
  void broadcast(const Call& call, void* data, bool useCache, bool mayCache);
  void allGather(const Call& call, const void* in, const std::vector<void*>& out, bool useCache, bool mayCache);
  void reduceScatter(const Call& call, const std::vector<void*>& in, void* out, bool useCache, bool mayCache);
  void allToAll(const Call& call, const std::vector<void*>& in, const std::vector<void*>& out);
  /// The most elements one algorithm instance takes for `call`.
  int64_t pieceElements(const Call& call) const;

  std::shared_ptr<::gloo::Context> context_;
  const int rank_, size_;
  const int64_t maxElements_;
  const std::chrono::milliseconds timeout_;
  Fingerprint fpIn_[2];
  std::vector<Fingerprint> fpOut_[2];
  std::unique_ptr<::gloo::Algorithm> fpGather_[2], barrier_;
  uint64_t exchanges_ = 0;
  std::map<Key, Entry> cache_;
  /// KILN_DIST_DEBUG=off: all-reduces on staging (Note [Staged all-reduces
  /// without fingerprints]), by dtype, reduce op and count.
  std::map<std::tuple<int, int, int64_t>, Entry> staged_;
  uint64_t clock_ = 0;
};

/// Divides each of `numel` elements of floating-point `dtype` at `data` by
/// `divisor` (avg after a sum).
void divideInPlace(void* data, int64_t numel, DType dtype, int divisor);

/// The TCP device a group listens on: options.hostname, else the interface
/// GLOO_SOCKET_IFNAME names, else the host name when it resolves and binds,
/// else 127.0.0.1.
std::shared_ptr<::gloo::transport::Device> makeDevice(const ProcessGroupOptions& options);
/// Gloo's message without its source location, as "gloo: ...".
std::string glooText(const std::string& what);
/// Whether Gloo's message says that a wait timed out.
bool saysTimeout(const std::string& what);

}  // namespace kiln::runtime::dist::gloo_backend

#endif  // KILN_HAVE_GLOO
