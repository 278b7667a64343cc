// A shared library opened at run time (dlopen), for the libraries kiln uses
// only when a machine has them: NVRTC, the CUDA driver, cuBLAS(Lt), cuDNN,
// NCCL and NVML (DEVICE_NOTES, "CUDA through dlopen"). None of them is then a
// needed library of libkiln.so, so kiln loads and runs its CPU and OpenCL
// paths on a machine without them, and says why a path is unavailable
// instead of failing to start.
//
// A library is opened once and never closed (its functions may be held in
// tables for the life of the process), as PyTorch's lazy NVRTC does.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace kiln::runtime {

/// Where a library is looked for: the same three places for each of them,
/// so that one environment variable per library overrides the search and
/// a toolkit that is not on the loader's path is still found.
struct LibrarySearch {
  /// An environment variable (KILN_CUDNN_LIBRARY, ...): when set and not
  /// empty, its value is the only candidate, so that a wrong path is
  /// reported instead of another copy of the library being used silently.
  std::string overrideVariable;
  /// Names the dynamic loader searches for (LD_LIBRARY_PATH, ld.so.cache),
  /// most preferred first: libcudnn.so.9, ...
  std::vector<std::string> sonames;
  /// Folders where each soname is then tried by path (a CUDA toolkit's
  /// lib64/, which the loader may not know).
  std::vector<std::string> folders;

  /// The candidates in order, without repeats: the override alone, or each
  /// soname, then each folder/soname.
  std::vector<std::string> candidates() const;
};

class DynamicLibrary {
 public:
  /// Opens the first of `candidates` (names the dynamic loader searches
  /// for, or paths) that loads. When none does, loaded() is false and
  /// error() names each candidate with the loader's reason.
  static DynamicLibrary open(std::span<const std::string> candidates);

  bool loaded() const { return handle_ != nullptr; }
  /// The candidate that loaded.
  const std::string& name() const { return name_; }
  /// Why no candidate loaded; empty when one did.
  const std::string& error() const { return error_; }

  /// The address of `symbol`, or nullptr with `why` saying so (the library
  /// is not loaded, or has no such symbol).
  void* symbol(const char* symbol, std::string* why = nullptr) const;

 private:
  void* handle_ = nullptr;
  std::string name_;
  std::string error_;
};

/// Resolves a loaded library's entry points into typed function pointers,
/// noting each name it resolves in `resolved` and the first failure in
/// `error` (the CUDA libraries' loaders: runtime/cuda_blas.cpp,
/// runtime/cuda_dnn.cpp): `resolve("cublasCreate_v2", api.create);`.
class SymbolResolver {
 public:
  SymbolResolver(const DynamicLibrary& library, std::vector<std::string>& resolved, std::string& error)
      : library_(library), resolved_(resolved), error_(error) {}
  template <typename Fn>
  void operator()(const char* name, Fn& slot) {
    std::string why;
    slot = reinterpret_cast<Fn>(library_.symbol(name, &why));
    if (slot)
      resolved_.emplace_back(name);
    else if (error_.empty())
      error_ = why;
  }

 private:
  const DynamicLibrary& library_;
  std::vector<std::string>& resolved_;
  std::string& error_;
};

}  // namespace kiln::runtime
