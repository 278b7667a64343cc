// The signature check of collectives (Note [Collective fingerprints] in
// runtime/dist_fingerprint.cpp): a fixed-size fingerprint of each call that
// the backends exchange before running it, and the messages that name both
// ranks' calls when they differ. Used by every backend; the exchange itself
// is the backend's (Gloo: a ring all-gather on the group's own context).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dist_process_group.h"

namespace kiln::runtime::dist {

/// What a rank says of its call, in 96 bytes sent as they are (every rank
/// of a job runs on the same architecture).
struct Fingerprint {
  static constexpr uint32_t kMagic = 0x6b6c6e66;  // "kfnl"
  static constexpr int kMaxDims = 6;

  uint32_t magic = kMagic;
  uint8_t kind = 0, dtype = 0, op = 0, ndim = 0;
  int32_t root = -1, peer = -1, tag = 0;
  /// Gloo: the build of the cached algorithm this rank would reuse for the
  /// call (the low 32 bits of the sequence number of the call that built
  /// it), 0 for none; the call reuses cached algorithms only when every rank
  /// names the same build (Note [Cached Gloo algorithms]).
  uint32_t cachedBuild = 0;
  uint64_t sequence = 0;
  int64_t numel = 0;
  int64_t dims[kMaxDims] = {};
  uint64_t hash = 0;  ///< of Call::signature()
};
static_assert(sizeof(Fingerprint) == 96, "the fingerprint's wire size is part of the protocol");

/// The fingerprint of `call` (its sequence number included).
Fingerprint fingerprintOf(const Call& call);
/// What the fingerprinted call is: "all_reduce(f32[4], sum)" (Call::describe).
std::string describe(const Fingerprint& fp);

/// The mismatch error for `mine` given every rank's fingerprint (in rank
/// order), or empty when they agree: "all_reduce: collective mismatch at
/// sequence 7: rank 0 called all_reduce(f32[4], sum), rank 1 called
/// broadcast(f32[4], root=0)". Every rank compares every rank with rank 0,
/// so every rank reports the same pair.
std::string findMismatch(const Call& mine, const std::vector<Fingerprint>& all);

/// The error for a recv (`mine`, on rank `myRank`) whose sender announced
/// `sent`, or empty when they agree.
std::string findP2pMismatch(const Call& mine, int myRank, const Fingerprint& sent);

/// KILN_DIST_DEBUG=detail: every rank puts its call's full signature in
/// `store` and reads every other's (each read waits up to `timeout`); the
/// mismatch error, or empty. A rank whose signature does not come in time
/// is a failure: kiln::Error naming it (`missing` receives its rank).
std::string exchangeSignatures(Store& store, const Call& mine, int rank, int size, std::chrono::milliseconds timeout,
                               int& missing);
/// The store key of rank `rank`'s signature of collective `sequence`. A
/// backend deletes its own once the fingerprint exchange of that call has
/// passed (every rank has read it by then).
std::string signatureKey(uint64_t sequence, int rank);

}  // namespace kiln::runtime::dist
