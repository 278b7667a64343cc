// kiln::save and kiln::load: tensors and state dicts in the safetensors
// format (the layout of the `safetensors` project, read and written by
// PyTorch and Hugging Face tools): an 8-byte little-endian header length
// N, N bytes of JSON — per tensor its dtype ("F32", "F64", "F16", "BF16",
// "I32", "I64", "BOOL"), shape and data_offsets [begin, end) into the data,
// and an optional "__metadata__" object of strings —, then the tensors'
// raw little-endian bytes. docs/checkpoints.md says more.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "frontend/nn/ordered_dict.h"
#include "frontend/tensor.h"

namespace kiln {

/// Tensors by name, in order (nn::Module::stateDict() is one).
using TensorDict = nn::OrderedDict<Tensor>;

/// What load() reads from a file.
struct SafetensorsFile {
  TensorDict tensors;                          ///< in the file's data order
  std::map<std::string, std::string> metadata;  ///< its "__metadata__"
};

/// Writes `tensors` (any device, any layout: written contiguous, in this
/// order) and `metadata` to `path`, atomically: into a temporary file in the
/// same directory, flushed to disk (fsync), then renamed over `path`, so a
/// crash mid-save leaves the previous file whole. kiln::Error naming the
/// path and the system's reason when it cannot be written, or naming the
/// tensor an undefined one.
void save(const TensorDict& tensors, const std::string& path, const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file; the tensors are made on `device`. kiln::Error
/// naming the file and what is wrong with it: missing, truncated (shorter
/// than its header or its data say), a header that is not the format's JSON,
/// a dtype kiln does not have, offsets that do not match a tensor's size or
/// overlap another's.
SafetensorsFile load(const std::string& path, Device device = Device::cpu());

namespace detail {
/// Called after each piece of a save is written, with the bytes written so
/// far; unset normally. Tests set it in a child process that then dies
/// there, to show that a crash mid-save leaves the previous file whole.
std::function<void(size_t)>& saveProgressHook();
}  // namespace detail

}  // namespace kiln
