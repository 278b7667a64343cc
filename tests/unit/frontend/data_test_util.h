// Data sets the data-loading tests share (tests/unit/frontend/data_*_test.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::data::testing {

/// Example i is (f32[2] {i, 10 i}, i64[] i); `onGet` runs first (a slow or
/// failing transform's stand-in).
class NumberDataset : public Dataset {
 public:
  explicit NumberDataset(int64_t size, std::function<void(int64_t)> onGet = {})
      : size_(size), onGet_(std::move(onGet)) {}
  Example get(int64_t index) const override {
    if (onGet_) onGet_(index);
    // Thread ids are reused once a thread is joined; thread_local state is not.
    thread_local uint64_t seen = 0;
    if (seen != id_) {
      seen = id_;
      ++threads_;
    }
    const auto v = static_cast<float>(index);
    return Example(fromVector({v, 10 * v}, {2}, Device::cpu()),
                   fromVector(std::vector<int64_t>{index}, {}, Device::cpu()));
  }
  int64_t size() const override { return size_; }
  /// The threads get() has run on.
  int threadCount() const { return threads_.load(); }

 private:
  int64_t size_;
  std::function<void(int64_t)> onGet_;
  inline static std::atomic<uint64_t> nextId_{0};
  uint64_t id_ = ++nextId_;
  mutable std::atomic<int> threads_{0};
};

/// The labels of each batch of one epoch.
inline std::vector<std::vector<int64_t>> labelsOf(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (Batch& b : loader) out.push_back(b.target().toVector<int64_t>());
  return out;
}

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace kiln::data::testing
