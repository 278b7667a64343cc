// Out-of-line part of runtime/error.h: the message of a failed internal assert.
#include "runtime/error.h"

namespace kiln::detail {

void assertFailed(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("kiln bug: {}:{}: assertion `{}` failed{}{} (please report it)", file,
                                  line, cond, msg.empty() ? "" : ": ", msg));
}

}  // namespace kiln::detail
