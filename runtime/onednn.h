// What kiln's oneDNN calls share (runtime/onednn_matmul.cpp, runtime/conv.cpp):
// the CPU engine, a stream per calling thread, memory objects over kiln's
// buffers and status checks. Internal to the runtime, and only for sources
// built with KILN_HAVE_ONEDNN (CMakeLists.txt lists them).
#pragma once

#ifndef KILN_HAVE_ONEDNN
#error "runtime/onednn.h is for sources built with oneDNN (KILN_HAVE_ONEDNN)"
#endif

#include <oneapi/dnnl/dnnl.h>

#include <cstddef>
#include <vector>

#include "runtime/error.h"

/// Checks a oneDNN call's status: kiln::Error naming `op` and the call.
#define KILN_DNNL(op, call)                                                                 \
  do {                                                                                      \
    const dnnl_status_t status_ = (call);                                                   \
    KILN_CHECK(status_ == dnnl_success, "{}: oneDNN's {} failed with status {}", op, #call, \
               static_cast<int>(status_));                                                  \
  } while (0)

namespace kiln::runtime::detail {

/// The process's oneDNN CPU engine.
dnnl_engine_t oneDnnEngine();
/// The calling thread's oneDNN stream on it.
dnnl_stream_t oneDnnThreadStream();
/// The implementation a primitive descriptor picked ("brg:avx512_core_bf16",
/// "jit:avx2", "ref:any", ...).
const char* oneDnnImplementation(const_dnnl_primitive_desc_t pd);
/// A growable scratch buffer of the calling thread, at least `bytes` long
/// (primitives made with dnnl_scratchpad_mode_user run on it, so that kiln's
/// threads may each run one at once); `slot` 0 to 3 names one of four
/// (a scratchpad and reordered operands).
void* oneDnnThreadScratch(size_t bytes, int slot = 0);

/// A oneDNN memory object over memory kiln owns.
class OneDnnMemory {
 public:
  OneDnnMemory(const dnnl_memory_desc_t& desc, const void* data);
  ~OneDnnMemory();
  OneDnnMemory(const OneDnnMemory&) = delete;
  OneDnnMemory& operator=(const OneDnnMemory&) = delete;
  dnnl_memory_t get() const { return m_; }

 private:
  dnnl_memory_t m_ = nullptr;
};

}  // namespace kiln::runtime::detail
