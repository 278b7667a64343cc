// The file store (runtime/dist_file_store.h): a log of set and delete
// records in one file, appended under flock() and replayed by every process.
#include "runtime/dist_file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "runtime/dist_wire.h"

namespace kiln::runtime::dist {

namespace {

constexpr char kHeader[8] = {'K', 'I', 'L', 'N', 'F', 'S', '0', '1'};
constexpr uint8_t kSetRecord = 1;
constexpr uint8_t kDeleteRecord = 2;
/// The count of FileStore objects open on the file (hidden from numKeys).
const std::string kUsersKey("\0kiln/file-store-users", 22);

void putU32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t getU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

/// Holds the store's mutex and the file's exclusive lock, on the file that
/// is at the path now (reopening it when the last user removed the old one),
/// with every record appended so far replayed.
class FileStore::Lock {
 public:
  explicit Lock(FileStore& s) : store_(s), guard_(s.mutex_) {
    while (true) {
      if (!store_.fd_) store_.open();
      while (::flock(store_.fd_.get(), LOCK_EX) != 0) {
        KILN_CHECK(errno == EINTR, "store: cannot lock file store {}: {}", store_.path_, errnoText(errno));
      }
      struct stat st {};
      if (::fstat(store_.fd_.get(), &st) == 0 && st.st_nlink > 0) break;
      // Removed by its last user while we waited for the lock: open the new one.
      store_.fd_.reset();
    }
    try {
      store_.refresh();
    } catch (...) {
      ::flock(store_.fd_.get(), LOCK_UN);
      throw;
    }
  }
  ~Lock() { ::flock(store_.fd_.get(), LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  FileStore& store_;
  std::lock_guard<std::mutex> guard_;
};

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout) : Store(timeout), path_(std::move(path)) {
  Lock lock(*this);
  Bytes updated;
  addTo(kUsersKey, find(kUsersKey), 1, updated);
  append(kSetRecord, kUsersKey, updated);
}

FileStore::~FileStore() {
  try {
    Lock lock(*this);
    Bytes updated;
    if (addTo(kUsersKey, find(kUsersKey), -1, updated) <= 0)
      ::unlink(path_.c_str());
    else
      append(kSetRecord, kUsersKey, updated);
  } catch (const std::exception&) {
    // A destructor cannot report; the file stays.
  }
}

void FileStore::open() {
  fd_.reset(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  KILN_CHECK(fd_, "store: cannot open file store {}: {}", path_, errnoText(errno));
  // A new file (or the first): replay it from the start.
  offset_ = 0;
  data_.clear();
}

void FileStore::refresh() {
  struct stat st {};
  KILN_CHECK(::fstat(fd_.get(), &st) == 0, "store: cannot read file store {}: {}", path_, errnoText(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < offset_) {  // truncated under us: replay from the start
    offset_ = 0;
    data_.clear();
  }
  if (size == 0) {
    KILN_CHECK(::pwrite(fd_.get(), kHeader, sizeof(kHeader), 0) == sizeof(kHeader),
               "store: cannot write file store {}: {}", path_, errnoText(errno));
    offset_ = sizeof(kHeader);
    return;
  }
  if (size == offset_) return;
  Bytes buffer(size - offset_);
  size_t got = 0;
  while (got < buffer.size()) {
    const ssize_t n = ::pread(fd_.get(), buffer.data() + got, buffer.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    KILN_CHECK(n > 0, "store: cannot read file store {}: {}", path_, n < 0 ? errnoText(errno) : "it shrank");
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  if (offset_ == 0) {
    KILN_CHECK(buffer.size() >= sizeof(kHeader) && std::memcmp(buffer.data(), kHeader, sizeof(kHeader)) == 0,
               "store: {} is not a kiln file store (it does not start with KILNFS01)", path_);
    pos = sizeof(kHeader);
  }
  while (true) {
    const size_t start = pos;
    const size_t left = buffer.size() - pos;
    if (left < 5) break;
    const uint8_t kind = buffer[pos];
    const uint32_t keyLen = getU32(&buffer[pos + 1]);
    KILN_CHECK((kind == kSetRecord || kind == kDeleteRecord) && keyLen <= wire::kMaxKeyBytes,
               "store: file store {} is corrupt at byte {}", path_, offset_ + start);
    if (left < 9 + size_t{keyLen}) break;
    const uint32_t valueLen = getU32(&buffer[pos + 5 + keyLen]);
    KILN_CHECK(valueLen <= wire::kMaxValueBytes, "store: file store {} is corrupt at byte {}", path_, offset_ + start);
    if (left < 9 + size_t{keyLen} + valueLen) break;
    std::string key(buffer.begin() + static_cast<std::ptrdiff_t>(pos + 5),
                    buffer.begin() + static_cast<std::ptrdiff_t>(pos + 5 + keyLen));
    const auto value = buffer.begin() + static_cast<std::ptrdiff_t>(pos + 9 + keyLen);
    if (kind == kSetRecord)
      data_[std::move(key)] = Bytes(value, value + valueLen);
    else
      data_.erase(key);
    pos += 9 + size_t{keyLen} + valueLen;
  }
  offset_ += pos;
  // A record cut short: its writer died mid-write (writers hold the lock), so
  // nobody will finish it. Cut it off, so that what is appended next is read.
  if (offset_ < size) ::ftruncate(fd_.get(), static_cast<off_t>(offset_));
}

void FileStore::append(uint8_t kind, const std::string& key, const Bytes& value) {
  KILN_CHECK(key.size() <= wire::kMaxKeyBytes, "store: a key of {} bytes exceeds {}", key.size(), wire::kMaxKeyBytes);
  KILN_CHECK(value.size() <= wire::kMaxValueBytes, "store: set of key {}: value of {} bytes exceeds {}", key,
             value.size(), wire::kMaxValueBytes);
  Bytes record;
  record.reserve(9 + key.size() + value.size());
  record.push_back(kind);
  putU32(record, static_cast<uint32_t>(key.size()));
  record.insert(record.end(), key.begin(), key.end());
  putU32(record, static_cast<uint32_t>(value.size()));
  record.insert(record.end(), value.begin(), value.end());
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n =
        ::pwrite(fd_.get(), record.data() + done, record.size() - done, static_cast<off_t>(offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::ftruncate(fd_.get(), static_cast<off_t>(offset_));  // leave no half record
      fail("store: cannot write file store {}: {}", path_, errnoText(err));
    }
    done += static_cast<size_t>(n);
  }
  offset_ += record.size();
  if (kind == kSetRecord)
    data_[key] = value;
  else
    data_.erase(key);
}

const Bytes* FileStore::find(const std::string& key) const {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second;
}

void FileStore::set(const std::string& key, const Bytes& value) {
  Lock lock(*this);
  append(kSetRecord, key, value);
}

Bytes FileStore::get(const std::string& key) {
  wait({key}, timeout());
  Lock lock(*this);
  const Bytes* v = find(key);
  KILN_CHECK(v, "store: key {} was deleted while being read", key);
  return *v;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  Lock lock(*this);
  Bytes updated;
  const int64_t value = addTo(key, find(key), delta, updated);
  append(kSetRecord, key, updated);
  return value;
}

Bytes FileStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Lock lock(*this);
  Bytes result;
  if (compareSetDecision(find(key), expected, desired, result)) append(kSetRecord, key, desired);
  return result;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  Lock lock(*this);
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return find(k) != nullptr; });
}

bool FileStore::deleteKey(const std::string& key) {
  Lock lock(*this);
  if (!find(key)) return false;
  append(kDeleteRecord, key, {});
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = deadlineAfter(timeout);
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    std::vector<std::string> missing;
    {
      Lock lock(*this);
      for (const std::string& k : keys)
        if (!find(k)) missing.push_back(k);
    }
    if (missing.empty()) return;
    const auto now = SteadyClock::now();
    if (now >= deadline) fail("{}", waitTimeoutMessage(missing, timeout));
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

int64_t FileStore::numKeys() {
  Lock lock(*this);
  return static_cast<int64_t>(data_.size() - data_.count(kUsersKey));
}

}  // namespace kiln::runtime::dist
