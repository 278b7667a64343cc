// KILN_PROFILE=path: a profile of the whole program (docs/profiler.md).
//
// Note [The whole-program profile]
// When libkiln is loaded with KILN_PROFILE set, a static initializer here
// starts a Profile of every activity, with shapes and memory, and
// registers an atexit handler that stops it and writes its Chrome trace to
// the path. The Profile is leaked, as are the collection core's registry
// (runtime/profiler_events.cpp) and the device drivers
// (runtime/device_interface.cpp), so none of them is destroyed before the
// handler runs, whatever the order of static destruction. A program that
// ends without exit() (a crash, _exit, std::quick_exit) writes nothing.
// While it runs, the program cannot start a Profile of its own.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "frontend/profiler.h"

namespace kiln::profiler {

namespace {

struct WholeProgramProfile {
  std::string path;
  Profile* profile = nullptr;
};

WholeProgramProfile* gWholeProgram = nullptr;

void writeWholeProgramProfile() {
  WholeProgramProfile& w = *gWholeProgram;
  try {
    w.profile->stop();
    w.profile->exportChromeTrace(w.path);
    std::fprintf(stderr, "kiln: KILN_PROFILE: wrote %zu events to %s\n", w.profile->events().size(), w.path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: KILN_PROFILE: %s\n", e.what());
  }
}

const bool gStarted = [] {
  const char* path = std::getenv("KILN_PROFILE");
  if (!path || !*path) return false;
  ProfileOptions options;
  options.recordShapes = true;
  options.profileMemory = true;
  gWholeProgram = new WholeProgramProfile{path, new Profile(std::move(options))};
  try {
    gWholeProgram->profile->start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: KILN_PROFILE: %s\n", e.what());
    return false;
  }
  std::atexit(&writeWholeProgramProfile);
  return true;
}();

}  // namespace

}  // namespace kiln::profiler
