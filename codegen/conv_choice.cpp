// installConvChoiceStore (codegen/conv_choice.h).
#include "codegen/conv_choice.h"

#include "codegen/disk_cache.h"
#include "codegen/target.h"
#include "runtime/conv.h"

namespace kiln::codegen {

void installConvChoiceStore() {
  static const bool installed = [] {
    runtime::ConvChoiceStore store;
    store.description = cpuTarget().description(Device::cpu());
    store.load = [](const std::string& key) { return DiskCache::instance().load(key); };
    store.save = [](const std::string& key, const std::string& value) { DiskCache::instance().store(key, value); };
    runtime::setConvChoiceStore(std::move(store));
    return true;
  }();
  (void)installed;
}

}  // namespace kiln::codegen
