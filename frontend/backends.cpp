// kiln::backends (frontend/backends.h): the runtime's settings.
#include "frontend/backends.h"

#include "runtime/conv.h"

namespace kiln::backends {

void setBenchmark(bool enabled) { runtime::setConvBenchmark(enabled); }
bool benchmark() { return runtime::convBenchmark(); }

}  // namespace kiln::backends
