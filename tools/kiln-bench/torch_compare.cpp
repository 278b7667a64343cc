// The PyTorch side of kiln-bench (torch_compare.h): spawning the script,
// the line protocol, and the flat JSON its answers are written in.
#include "tools/kiln-bench/torch_compare.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "tools/kiln-bench/measure.h"

extern char** environ;

namespace kiln::bench {

// --- flat JSON -------------------------------------------------------------

namespace {

class FlatJsonReader {
 public:
  explicit FlatJsonReader(const std::string& s) : s_(s) {}

  std::map<std::string, FlatJsonValue> object() {
    std::map<std::string, FlatJsonValue> out;
    expect('{');
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        std::string key = string();
        expect(':');
        out[key] = value();
        const char c = next();
        if (c == '}') break;
        if (c != ',') fail("expected ',' or '}'");
      }
    }
    if (peek() != '\0') fail("text after the object");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(fmt::format("bad JSON at column {}: {}", i_ + 1, what));
  }
  void skipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
  }
  char peek() {
    skipSpace();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  char next() {
    const char c = peek();
    if (c == '\0') fail("unexpected end");
    ++i_;
    return c;
  }
  void expect(char c) {
    if (next() != c) fail(fmt::format("expected '{}'", c));
  }
  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }
  FlatJsonValue value() {
    const char c = peek();
    if (c == '"') return string();
    if (literal("null")) return nullptr;
    if (literal("true")) return true;
    if (literal("false")) return false;
    if (c == '-' || (c >= '0' && c <= '9')) {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      const double v = std::strtod(start, &end);
      if (end == start) fail("bad number");
      i_ += static_cast<size_t>(end - start);
      return v;
    }
    fail("expected a string, number, true, false or null (nested values are not read)");
  }
  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      switch (const char e = s_[i_++]) {
        case '"':
        case '\\':
        case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("bad \\u escape");
          const unsigned long cp = std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16);
          i_ += 4;
          // UTF-8 of a BMP code point (surrogate pairs stay two '?': messages only).
          if (cp >= 0xD800 && cp <= 0xDFFF) {
            out += '?';
          } else if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

double numberOr(const std::map<std::string, FlatJsonValue>& o, const char* key, double otherwise) {
  auto it = o.find(key);
  return it != o.end() && std::holds_alternative<double>(it->second) ? std::get<double>(it->second) : otherwise;
}

std::string stringOr(const std::map<std::string, FlatJsonValue>& o, const char* key, std::string otherwise) {
  auto it = o.find(key);
  return it != o.end() && std::holds_alternative<std::string>(it->second) ? std::get<std::string>(it->second)
                                                                          : otherwise;
}

// The script next to this executable (where the build and `cmake --install`
// put it), or "" when it is not there.
std::string scriptPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (self.parent_path() / "kiln-bench-torch.py").string();
}

}  // namespace

std::map<std::string, FlatJsonValue> parseFlatJson(const std::string& line) { return FlatJsonReader(line).object(); }

// --- the process -------------------------------------------------------------

TorchSide::TorchSide(int threads, const RunPolicy& policy, bool compile) {
  const char* env = std::getenv("KILN_TORCH_PYTHON");
  info_.python = env && *env ? env : "python3";
  info_.compile = compile;
  if (policy.device.isOpenCL()) {
    info_.unavailable = "PyTorch has no OpenCL device";
    return;
  }
  const std::string script = scriptPath();
  if (script.empty() || !std::filesystem::exists(script)) {
    info_.unavailable = fmt::format("the PyTorch side '{}' is missing (it is built and installed next to kiln-bench)",
                                    script.empty() ? "kiln-bench-torch.py" : script);
    return;
  }
  std::vector<std::string> args = {info_.python, script,
                                   "--threads",  std::to_string(threads),
                                   "--repeats",  std::to_string(policy.repeats),
                                   "--min-runs", std::to_string(policy.minRuns),
                                   "--max-runs", std::to_string(policy.maxRuns),
                                   "--budget-s", fmt::format("{}", policy.budgetSeconds)};
  if (!compile) args.push_back("--no-compile");
  args.push_back("--device");
  args.push_back(policy.device.isCpu() ? "cpu" : policy.device.str());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int in[2], out[2];  // in: kiln-bench -> script; out: script -> kiln-bench
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    info_.unavailable = fmt::format("cannot make a pipe: {}", std::strerror(errno));
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const int rc = posix_spawnp(&pid_, info_.python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    pid_ = -1;
    info_.unavailable = fmt::format("cannot run '{}': {}", info_.python, std::strerror(rc));
    return;
  }
  // A script that dies must not kill kiln-bench with SIGPIPE on the next write.
  ::signal(SIGPIPE, SIG_IGN);
  toScript_ = ::fdopen(in[1], "w");
  fromScript_ = ::fdopen(out[0], "r");

  // The hello. Until it comes, the script is importing torch: nothing of
  // kiln's is timed meanwhile.
  std::optional<std::string> hello = readLine();
  if (!hello) {
    info_.unavailable = fmt::format("'{} {}' printed no hello: it {}", info_.python, script, stop());
    return;
  }
  try {
    const auto o = parseFlatJson(*hello);
    info_.version = stringOr(o, "torch", "");
    info_.threads = static_cast<int>(numberOr(o, "threads", 0));
    info_.cpuCapability = stringOr(o, "cpu_capability", "");
    if (info_.version.empty()) info_.unavailable = stringOr(o, "error", "the script found no torch");
  } catch (const std::exception& e) {
    info_.unavailable = fmt::format("'{} {}' printed a bad hello: {}", info_.python, script, e.what());
  }
  if (!info_.unavailable.empty()) stop();
}

TorchSide::~TorchSide() { stop(); }

std::optional<std::string> TorchSide::readLine() {
  if (!fromScript_) return std::nullopt;
  std::string line;
  for (int c; (c = std::fgetc(fromScript_)) != EOF;) {
    if (c == '\n') return line;
    line += static_cast<char>(c);
  }
  return std::nullopt;  // the script exited (or closed its stdout)
}

std::string TorchSide::stop() {
  if (toScript_) std::fclose(toScript_);  // EOF on its stdin: it exits
  if (fromScript_) std::fclose(fromScript_);
  toScript_ = fromScript_ = nullptr;
  std::string how = "was not running";
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    how = WIFEXITED(status)     ? fmt::format("exited with status {}", WEXITSTATUS(status))
          : WIFSIGNALED(status) ? fmt::format("was killed by signal {}", WTERMSIG(status))
                                : "stopped";
  }
  pid_ = -1;
  return how;
}

TorchResult TorchSide::run(const std::string& name, const std::vector<ir::TensorType>& inputs) {
  TorchResult r;
  if (!available() || !lost_.empty()) {
    r.error = r.compileError = available() ? lost_ : info_.unavailable;
    return r;
  }
  std::string request = fmt::format("{{\"name\": \"{}\", \"inputs\": [", name);
  for (size_t i = 0; i < inputs.size(); ++i)
    request += fmt::format("{}{{\"dtype\": \"{}\", \"shape\": [{}]}}", i ? ", " : "", dtypeName(inputs[i].dtype),
                           fmt::join(inputs[i].shape, ", "));
  request += "]}\n";
  std::optional<std::string> reply;
  if (std::fputs(request.c_str(), toScript_) >= 0 && std::fflush(toScript_) == 0) reply = readLine();
  try {
    if (!reply) throw std::runtime_error("it answered nothing and " + stop());
    const auto o = parseFlatJson(*reply);
    if (stringOr(o, "name", "") != name)
      throw std::runtime_error(fmt::format("it answered for '{}'", stringOr(o, "name", "")));
    r.error = stringOr(o, "error", "");
    r.eagerMs = numberOr(o, "eager_ms", NAN);
    r.eagerFirstMs = numberOr(o, "eager_first_ms", NAN);
    r.eagerRuns = static_cast<int>(numberOr(o, "eager_runs", 0));
    r.compiledMs = numberOr(o, "compiled_ms", NAN);
    r.compileMs = numberOr(o, "compile_ms", NAN);
    r.compiledRuns = static_cast<int>(numberOr(o, "compiled_runs", 0));
    r.compileError = stringOr(o, "compile_error", "");
    if (r.error.empty() && std::isnan(r.eagerMs)) r.error = "the script gave no eager time";
    if (r.compileError.empty() && std::isnan(r.compiledMs)) r.compileError = "the script gave no compiled time";
  } catch (const std::exception& e) {
    r = TorchResult{};
    r.error = r.compileError = fmt::format("the PyTorch side failed on {}: {}", name, e.what());
    lost_ = r.error;
    stop();
  }
  return r;
}

}  // namespace kiln::bench
