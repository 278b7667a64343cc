#include "runtime/dynamic_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace kiln::runtime {

std::vector<std::string> LibrarySearch::candidates() const {
  if (!overrideVariable.empty())
    if (const char* path = std::getenv(overrideVariable.c_str()); path && *path) return {path};
  std::vector<std::string> out;
  auto add = [&](std::string candidate) {
    if (std::find(out.begin(), out.end(), candidate) == out.end()) out.push_back(std::move(candidate));
  };
  for (const std::string& soname : sonames) add(soname);
  for (const std::string& folder : folders) {
    if (folder.empty()) continue;
    for (const std::string& soname : sonames) add(folder.back() == '/' ? folder + soname : folder + "/" + soname);
  }
  return out;
}

DynamicLibrary DynamicLibrary::open(std::span<const std::string> candidates) {
  DynamicLibrary library;
  std::string reasons;
  for (const std::string& candidate : candidates) {
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      library.handle_ = handle;
      library.name_ = candidate;
      return library;
    }
    const char* reason = dlerror();
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", candidate, reason ? reason : "not loaded");
  }
  library.error_ = candidates.empty() ? "no library to open" : reasons;
  return library;
}

void* DynamicLibrary::symbol(const char* symbol, std::string* why) const {
  if (!handle_) {
    if (why) *why = fmt::format("{} is not loaded ({})", symbol, error_);
    return nullptr;
  }
  dlerror();  // clears an earlier error, so a null from dlsym is told apart
  void* address = dlsym(handle_, symbol);
  if (!address && why) {
    const char* reason = dlerror();
    *why = fmt::format("{} has no symbol {}{}{}", name_, symbol, reason ? ": " : "", reason ? reason : "");
  }
  return address;
}

}  // namespace kiln::runtime
