// libFuzzer target for the IR parser and verifier (issue: "no input crashes
// the parser"). Every input is cut into chunks and parsed; a chunk that
// parses and verifies must also round-trip: printed, parsed again, verified
// again and printed again, it gives the same text. A kiln::Error is a fine
// answer to bad input; anything else — a sanitizer report, an InternalError,
// a failed round trip — is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/error.h"

namespace {

void roundTrip(const kiln::ir::Graph& g) {
  const std::string once = kiln::ir::printGraph(g);
  try {
    auto again = kiln::ir::parseGraph(once, "printed.kir");
    kiln::ir::verify(*again);
    if (kiln::ir::printGraph(*again) != once) __builtin_trap();  // the round trip changed the text
  } catch (const kiln::Error&) {
    __builtin_trap();  // what the printer writes must parse and verify
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const kiln::ir::SourceChunk& chunk : kiln::ir::splitInputFile(text)) {
    kiln::ir::ParseResult parsed;
    try {
      parsed = kiln::ir::parseSource(chunk.text, "fuzz.kir", chunk.firstLine);
    } catch (const kiln::Error&) {
      continue;
    }
    for (const auto& g : parsed.graphs) {
      try {
        kiln::ir::verify(*g, &parsed.locations);
      } catch (const kiln::Error&) {
        continue;
      }
      roundTrip(*g);
    }
  }
  return 0;
}
