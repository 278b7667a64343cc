// The expected-error checker of tools/irdump/diagnostics.h.
#include "tools/irdump/diagnostics.h"

#include <fmt/format.h>

#include <cstdio>
#include <regex>
#include <vector>

#include "runtime/error.h"

namespace kiln::tools {

namespace {
struct Expected {
  int line;      ///< the line the error must be reported on
  int written;   ///< the line of the annotation
  std::string text;
  bool seen = false;
};

/// The expectations written in a chunk (line numbers of the whole file).
std::vector<Expected> expectations(const ir::SourceChunk& chunk) {
  static const std::regex annotation(R"(//\s*expected-error(@([+-])(\d+))?\s*\{\{(.*)\}\})");
  std::vector<Expected> out;
  int line = chunk.firstLine;
  size_t start = 0;
  while (start <= chunk.text.size()) {
    size_t end = chunk.text.find('\n', start);
    if (end == std::string_view::npos) end = chunk.text.size();
    std::string text(chunk.text.substr(start, end - start));
    std::smatch m;
    if (std::regex_search(text, m, annotation)) {
      int offset = m[1].matched ? std::stoi(m[3]) * (m[2] == "-" ? -1 : 1) : 0;
      out.push_back({line + offset, line, m[4], false});
    }
    start = end + 1;
    ++line;
  }
  return out;
}

/// The line of a message that starts "file:line:col: ", or 0.
int lineOf(const std::string& message, const std::string& file) {
  if (!message.starts_with(file + ":")) return 0;
  return std::atoi(message.c_str() + file.size() + 1);
}
}  // namespace

int verifyDiagnostics(std::string_view text, const std::string& file,
                      const std::function<void(const ir::SourceChunk&)>& process) {
  int failures = 0;
  auto report = [&](int line, const std::string& what) {
    std::fprintf(stderr, "%s:%d: %s\n", file.c_str(), line, what.c_str());
    ++failures;
  };
  for (const ir::SourceChunk& chunk : ir::splitInputFile(text)) {
    std::vector<Expected> expected = expectations(chunk);
    try {
      process(chunk);
    } catch (const Error& e) {
      const std::string message = e.what();
      const int line = lineOf(message, file);
      bool matched = false;
      for (Expected& x : expected)
        if (!x.seen && x.line == line && message.find(x.text) != std::string::npos) matched = x.seen = true;
      if (!matched) report(line ? line : chunk.firstLine, "unexpected error: " + message);
    }
    for (const Expected& x : expected)
      if (!x.seen) report(x.written, fmt::format("expected error on line {} was not produced: {}", x.line, x.text));
  }
  return failures;
}

}  // namespace kiln::tools
