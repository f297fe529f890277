// InputFile: stat, O_NONBLOCK open, fstat of the descriptor, bounded reads (see input_file.h).
#include "util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace agentkv {

namespace {

// What a non-regular file is, in the words of an error message.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a plain file";
}

Error os_error(const std::string& where, int err) {
  return make_error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                    where + ": " + std::strerror(err));
}

Error over_bound(const std::string& where, int64_t size, int64_t max_bytes, bool at_least) {
  return make_error(ErrorCode::kTooLarge, where + ": " + (at_least ? "more than " : "") + std::to_string(size) +
                                              " bytes, over the " + std::to_string(max_bytes) + "-byte limit");
}

}  // namespace

Result<InputFile> InputFile::open(const std::string& path, int64_t max_bytes, std::string_view what) {
  const std::string where = std::string(what) + " " + path;
  if (path.empty()) return make_error(std::string(what) + ": the path is empty");
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) return os_error(where, errno);
  if (!S_ISREG(before.st_mode)) return make_error(where + ": " + kind_of(before.st_mode) + ", not a regular file");
  // O_NONBLOCK: should a FIFO be swapped in after the stat, open returns instead of waiting.
  InputFile f;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd_ < 0) return os_error(where, errno);
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) return os_error(where, errno);
  if (!S_ISREG(st.st_mode)) return make_error(where + ": " + kind_of(st.st_mode) + ", not a regular file");
  if (st.st_dev != before.st_dev || st.st_ino != before.st_ino)
    return make_error(where + ": the file was replaced while it was being opened");
  // Regular files ignore O_NONBLOCK, but later readers need not know it was set.
  (void)::fcntl(f.fd_, F_SETFL, ::fcntl(f.fd_, F_GETFL) & ~O_NONBLOCK);
  f.size_ = int64_t(st.st_size);
  f.max_bytes_ = max_bytes;
  f.where_ = where;
  if (f.size_ > max_bytes) return over_bound(where, f.size_, max_bytes, false);
  return f;
}

Result<std::string> InputFile::read_all() {
  std::string out;
  out.resize(size_t(size_ < max_bytes_ ? size_ : max_bytes_) + 1);
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (int64_t(have) > max_bytes_) return over_bound(where_, max_bytes_, max_bytes_, true);
      out.resize(std::min(out.size() * 2, size_t(max_bytes_) + 1));
    }
    const ssize_t n = ::read(fd_, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error(where_, errno);
    if (n == 0) break;
    have += size_t(n);
    if (int64_t(have) > max_bytes_) return over_bound(where_, max_bytes_, max_bytes_, true);
  }
  out.resize(have);
  return out;
}

InputFile::~InputFile() { reset(); }

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      max_bytes_(other.max_bytes_),
      where_(std::move(other.where_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    max_bytes_ = other.max_bytes_;
    where_ = std::move(other.where_);
  }
  return *this;
}

void InputFile::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<std::string> read_input_file(const std::string& path, int64_t max_bytes, std::string_view what) {
  InputFile f;
  AGENTKV_ASSIGN_OR_RETURN(f, InputFile::open(path, max_bytes, what));
  return f.read_all();
}

}  // namespace agentkv
