// kiln::save and kiln::load (frontend/serialization.h). The header is
// parsed with nlohmann-json (outside input: never by hand), every field
// checked before a byte of data is read; the file is read whole.
#include "frontend/serialization.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/error.h"

namespace kiln {

namespace {
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian, as this host must be");

using Json = nlohmann::ordered_json;

constexpr std::pair<DType, const char*> kNames[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::i32, "I32"}, {DType::i64, "I64"}, {DType::boolean, "BOOL"}};

const char* formatName(DType dtype) {
  for (const auto& [d, name] : kNames)
    if (d == dtype) return name;
  KILN_CHECK(false, "save: dtype {} has no safetensors name", dtypeName(dtype));
  return "";
}

std::optional<DType> dtypeOfName(const std::string& name) {
  for (const auto& [d, n] : kNames)
    if (name == n) return d;
  return std::nullopt;
}

/// The tensor's elements as bytes, row-major.
std::vector<unsigned char> bytesOf(const Tensor& t) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.numel() * itemSize(t.dtype())));
  auto copy = [&](const auto& v) {
    if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  };
  switch (t.dtype()) {
    case DType::f32: copy(t.toVector<float>()); break;
    case DType::f64: copy(t.toVector<double>()); break;
    case DType::f16: copy(t.toVector<Half>()); break;
    case DType::bf16: copy(t.toVector<BFloat16>()); break;
    case DType::i32: copy(t.toVector<int32_t>()); break;
    case DType::i64: copy(t.toVector<int64_t>()); break;
    case DType::boolean: {
      const std::vector<bool> v = t.toVector<bool>();
      for (size_t i = 0; i < v.size(); ++i) bytes[i] = v[i] ? 1 : 0;
      break;
    }
  }
  return bytes;
}

std::string systemError() { return std::strerror(errno); }

/// Writes all of `data` to fd; false (errno set) when it cannot.
bool writeAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

namespace detail {
std::function<void(size_t)>& saveProgressHook() {
  static std::function<void(size_t)> hook;
  return hook;
}
}  // namespace detail

void save(const TensorDict& tensors, const std::string& path, const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::vector<std::vector<unsigned char>> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors.items()) {
    KILN_CHECK(t.defined(), "save: tensor '{}' is undefined ({})", name, path);
    KILN_CHECK(name != "__metadata__", "save: a tensor cannot be named __metadata__ ({})", path);
    data.push_back(bytesOf(t));
    Json entry = Json::object();
    entry["dtype"] = formatName(t.dtype());
    entry["shape"] = t.shape();
    entry["data_offsets"] = {offset, offset + data.back().size()};
    header[name] = entry;
    offset += data.back().size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the reference pads
  const uint64_t length = text.size();

  // Temporary file, fsync, rename, fsync of the directory.
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  static std::atomic<int> counter{0};
  const std::filesystem::path tmp =
      dir / fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  KILN_CHECK(fd >= 0, "save: cannot write {}: {} (creating {})", path, systemError(), tmp.string());
  const std::function<void(size_t)>& hook = detail::saveProgressHook();
  size_t written = 0;
  auto put = [&](const void* p, size_t n) {
    if (!writeAll(fd, p, n)) return false;
    written += n;
    if (hook) hook(written);
    return true;
  };
  bool ok = put(&length, sizeof length) && put(text.data(), text.size());
  for (size_t i = 0; ok && i < data.size(); ++i) ok = put(data[i].data(), data[i].size());
  ok = ok && ::fsync(fd) == 0;
  const std::string why = ok ? "" : systemError();
  ::close(fd);
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string renameWhy = systemError();
    std::filesystem::remove(tmp);
    KILN_CHECK(false, "save: cannot write {}: {} (renaming {} over it)", path, renameWhy, tmp.string());
  }
  if (!ok) {
    std::filesystem::remove(tmp);
    KILN_CHECK(false, "save: cannot write {}: {}", path, why);
  }
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // the rename itself on disk
    ::close(dfd);
  }
}

SafetensorsFile load(const std::string& path, Device device) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "load: cannot read {}: {}", path, systemError());
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  KILN_CHECK(file.size() >= 8, "load: {} is not a safetensors file: it has {} bytes, fewer than the 8 of its header's length",
             path, file.size());
  uint64_t length = 0;
  std::memcpy(&length, file.data(), 8);
  KILN_CHECK(length <= file.size() - 8, "load: {} is truncated: its header says {} bytes of JSON follow, but {} do",
             path, length, file.size() - 8);
  Json header;
  try {
    header = Json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  } catch (const Json::exception& e) {
    KILN_CHECK(false, "load: {} is not a safetensors file: its header is not valid JSON ({})", path, e.what());
  }
  KILN_CHECK(header.is_object(), "load: {}: its header is JSON but not an object", path);
  const uint64_t dataSize = file.size() - 8 - length;
  const char* data = file.data() + 8 + length;

  SafetensorsFile out;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      KILN_CHECK(value.is_object(), "load: {}: __metadata__ must be an object of strings", path);
      for (const auto& [k, v] : value.items()) {
        KILN_CHECK(v.is_string(), "load: {}: __metadata__ entry '{}' is not a string", path, k);
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("load: {}: tensor '{}'", path, name);
    KILN_CHECK(value.is_object() && value.contains("dtype") && value.contains("shape") &&
                   value.contains("data_offsets"),
               "{} needs dtype, shape and data_offsets, got {}", where, value.dump());
    KILN_CHECK(value["dtype"].is_string(), "{}: dtype is not a string", where);
    const std::string dtypeName = value["dtype"].get<std::string>();
    const std::optional<DType> dtype = dtypeOfName(dtypeName);
    KILN_CHECK(dtype.has_value(), "{} has dtype {}, which kiln has none for (it reads F32, F64, F16, BF16, I32, I64, BOOL)",
               where, dtypeName);
    const Json& shapeJson = value["shape"];
    const Json& offsets = value["data_offsets"];
    KILN_CHECK(shapeJson.is_array(), "{}: shape is not an array", where);
    Shape shape;
    uint64_t count = 1;
    for (const Json& d : shapeJson) {
      KILN_CHECK(d.is_number_unsigned(), "{}: shape {} has a dimension that is not a size", where, shapeJson.dump());
      const uint64_t n = d.get<uint64_t>();
      KILN_CHECK(n <= (uint64_t{1} << 40) && (n == 0 || count <= (uint64_t{1} << 50) / n),
                 "{}: shape {} is too large", where, shapeJson.dump());
      count *= n;
      shape.push_back(static_cast<int64_t>(n));
    }
    KILN_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                   offsets[1].is_number_unsigned(),
               "{}: data_offsets must be [begin, end], got {}", where, offsets.dump());
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    const uint64_t bytes = count * static_cast<uint64_t>(itemSize(*dtype));
    KILN_CHECK(begin <= end && end - begin == bytes,
               "{}: data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", where, begin, end, end - begin,
               dtypeName, shapeJson.dump(), bytes);
    KILN_CHECK(end <= dataSize, "load: {} is truncated: tensor '{}' ends at byte {} of the data, which has {} bytes",
               path, name, end, dataSize);
    entries.push_back({name, *dtype, shape, begin, end});
  }
  // No two tensors share a byte (empty ones hold none).
  std::vector<const Entry*> byBegin;
  for (const Entry& e : entries)
    if (e.begin < e.end) byBegin.push_back(&e);
  std::sort(byBegin.begin(), byBegin.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < byBegin.size(); ++i)
    KILN_CHECK(byBegin[i]->begin >= byBegin[i - 1]->end, "load: {}: tensors '{}' and '{}' overlap in the data", path,
               byBegin[i - 1]->name, byBegin[i]->name);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (const Entry& e : entries)
    out.tensors.insert(e.name, detail::fromElements(data + e.begin, static_cast<int64_t>((e.end - e.begin) / static_cast<uint64_t>(itemSize(e.dtype))),
                                                    e.dtype, e.shape, device));
  return out;
}

}  // namespace kiln
