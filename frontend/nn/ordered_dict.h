// nn::OrderedDict: string keys in insertion order, as Python's dict and
// libtorch's torch::OrderedDict. Modules keep their parameters, buffers and
// submodules in one each, and a state dict is one (nn::StateDict), so that
// names come out in the order they were registered, as in PyTorch.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace kiln::nn {

template <typename Value>
class OrderedDict {
 public:
  using Item = std::pair<std::string, Value>;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<Item> items) {
    for (const Item& item : items) insert(item.first, item.second);
  }

  /// Adds `key` at the end; an error if it is there already.
  Value& insert(std::string key, Value value) {
    KILN_CHECK(!index_.count(key), "OrderedDict: key \"{}\" is already present", key);
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  /// Replaces the value of `key`, or adds it at the end.
  Value& insertOrAssign(const std::string& key, Value value) {
    if (Value* v = find(key)) return *v = std::move(value);
    return insert(key, std::move(value));
  }

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  /// The value of `key`, or null.
  Value* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const Value* find(const std::string& key) const { return const_cast<OrderedDict*>(this)->find(key); }
  /// The value of `key`; an error naming it if it is missing.
  const Value& at(const std::string& key) const {
    const Value* v = find(key);
    KILN_CHECK(v, "OrderedDict: no key \"{}\"", key);
    return *v;
  }
  Value& at(const std::string& key) { return const_cast<Value&>(std::as_const(*this).at(key)); }
  const Value& operator[](const std::string& key) const { return at(key); }
  Value& operator[](const std::string& key) { return at(key); }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const Item& item : items_) out.push_back(item.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    out.reserve(items_.size());
    for (const Item& item : items_) out.push_back(item.second);
    return out;
  }
  const std::vector<Item>& items() const { return items_; }

  // Iteration over (key, value) pairs in insertion order (read-only: keys
  // index the dict; change a value through at()).
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace kiln::nn
