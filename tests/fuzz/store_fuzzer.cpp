// libFuzzer target for the TCP store's server side (issue 12: "malformed or
// truncated messages get an error and a closed connection, never a crash or
// a hang of the server"): the request parser (runtime/dist_wire.h) and the
// server's table of keys and parked clients (runtime/dist_store_state.h),
// driven as the server drives them, with a made-up clock.
//
// Input: byte 0 picks the number of clients (1-4) and a reply type; the
// rest, read as a reply of that type, exercises the client's parser; then,
// from byte 1, a stream of [control byte][request] pairs: the control byte
// says which client sends and how far the clock moves. A malformed request
// ends the stream (the server closes that connection). Findings: a
// sanitizer report, an InternalError, a complete message that does not
// encode back to the same bytes, a reply to a client with no request
// outstanding, or a request that never gets its reply once every deadline
// has passed.
#include <array>
#include <cstddef>
#include <cstdint>

#include "runtime/dist_store_state.h"
#include "runtime/dist_wire.h"
#include "runtime/error.h"

namespace {

using kiln::runtime::dist::Bytes;
using kiln::runtime::dist::StoreState;
namespace wire = kiln::runtime::dist::wire;

void checkReplyParser(wire::Query type, const uint8_t* data, size_t size) {
  wire::Reply reply;
  const wire::ParseResult r = wire::parseReply(type, data, size, reply);
  if (r.kind != wire::ParseResult::kComplete) return;
  Bytes again;
  wire::encodeReply(type, reply, again);
  if (again.size() != r.size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t numClients = 1 + (data[0] & 3);
  checkReplyParser(static_cast<wire::Query>((data[0] >> 2) % wire::kNumQueries), data + 1, size - 1);

  StoreState state;
  std::array<int, 4> outstanding{};  // requests without a reply, per client
  auto now = StoreState::Clock::time_point{} + std::chrono::hours(1);
  std::vector<StoreState::Outgoing> out;
  auto deliver = [&] {
    for (const StoreState::Outgoing& o : out) {
      if (o.client >= numClients || outstanding[o.client] != 1) __builtin_trap();  // a reply nobody asked for
      --outstanding[o.client];
      Bytes bytes;
      wire::encodeReply(o.type, o.reply, bytes);
      checkReplyParser(o.type, bytes.data(), bytes.size());
    }
    out.clear();
  };

  size_t pos = 1;
  while (pos < size) {
    const uint8_t control = data[pos++];
    const StoreState::ClientId client = control % numClients;
    now += std::chrono::milliseconds((control >> 2) * 7);
    state.expire(now, out);
    deliver();
    wire::Request request;
    const wire::ParseResult r = wire::parseRequest(data + pos, size - pos, request);
    if (r.kind != wire::ParseResult::kComplete) break;
    Bytes again;
    wire::encodeRequest(request, again);
    if (again.size() != r.size || !std::equal(again.begin(), again.end(), data + pos)) __builtin_trap();
    pos += r.size;
    // The server reads nothing from a client it owes a reply.
    if (state.parked(client)) continue;
    ++outstanding[client];
    try {
      state.handle(client, request, now, out);
    } catch (const kiln::Error&) {
      __builtin_trap();  // the table answers errors with error replies, it never throws them
    }
    deliver();
  }
  state.expire(StoreState::Clock::time_point::max(), out);
  deliver();
  for (size_t c = 0; c < numClients; ++c)
    if (outstanding[c] != 0) __builtin_trap();
  if (state.numParked() != 0) __builtin_trap();
  return 0;
}
