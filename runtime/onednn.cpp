// The shared oneDNN pieces (runtime/onednn.h).
#ifdef KILN_HAVE_ONEDNN
#include "runtime/onednn.h"

namespace kiln::runtime::detail {

dnnl_engine_t oneDnnEngine() {
  static dnnl_engine_t e = [] {
    dnnl_engine_t made = nullptr;
    KILN_DNNL("oneDNN", dnnl_engine_create(&made, dnnl_cpu, 0));
    return made;
  }();
  return e;
}

dnnl_stream_t oneDnnThreadStream() {
  struct Stream {
    dnnl_stream_t s = nullptr;
    ~Stream() {
      if (s) dnnl_stream_destroy(s);
    }
  };
  thread_local Stream stream;
  if (!stream.s) KILN_DNNL("oneDNN", dnnl_stream_create(&stream.s, oneDnnEngine(), dnnl_stream_default_flags));
  return stream.s;
}

const char* oneDnnImplementation(const_dnnl_primitive_desc_t pd) {
  const char* impl = nullptr;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  return impl ? impl : "";
}

void* oneDnnThreadScratch(size_t bytes, int slot) {
  thread_local std::vector<char> scratch[4];
  KILN_ASSERT(slot >= 0 && slot < 4, "oneDNN scratch slot {}", slot);
  std::vector<char>& s = scratch[slot];
  if (s.size() < bytes) s.resize(bytes);
  return s.data();
}

OneDnnMemory::OneDnnMemory(const dnnl_memory_desc_t& desc, const void* data) {
  KILN_DNNL("oneDNN", dnnl_memory_create(&m_, &desc, oneDnnEngine(), const_cast<void*>(data)));
}

OneDnnMemory::~OneDnnMemory() { dnnl_memory_destroy(m_); }

}  // namespace kiln::runtime::detail
#endif
