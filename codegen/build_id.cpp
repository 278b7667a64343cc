// The GNU build ID of the binary holding kiln's codegen (codegen/build_id.h):
// dl_iterate_phdr finds the loaded object whose segments contain this
// function and walks its PT_NOTE segments for the NT_GNU_BUILD_ID note.
#include "codegen/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace kiln::codegen {

namespace {

struct Search {
  const void* base = nullptr;  ///< load address of the object holding codegenBuildId
  std::string id;
};

/// Notes are 4-byte aligned: name and descriptor are padded to 4 bytes.
size_t align4(size_t n) { return (n + 3) & ~size_t{3}; }

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  // The object whose segments contain the address dladdr found.
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const auto start = static_cast<uintptr_t>(info->dlpi_addr + ph.p_vaddr);
    const auto at = reinterpret_cast<uintptr_t>(search->base);
    mine = at >= start && at < start + ph.p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof note);
      const unsigned char* name = p + sizeof note;
      const unsigned char* desc = name + align4(note.n_namesz);
      if (desc + note.n_descsz > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char* hex = "0123456789abcdef";
        for (size_t k = 0; k < note.n_descsz; ++k) {
          search->id += hex[desc[k] >> 4];
          search->id += hex[desc[k] & 15];
        }
        return 1;
      }
      p = desc + align4(note.n_descsz);
    }
  }
  return 1;  // our object, without a build ID
}

}  // namespace

const std::string& codegenBuildId() {
  static const std::string id = [] {
    Search search;
    search.base = reinterpret_cast<const void*>(&codegenBuildId);
    dl_iterate_phdr(visit, &search);
    return search.id;
  }();
  return id;
}

}  // namespace kiln::codegen
