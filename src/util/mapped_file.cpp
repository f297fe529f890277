#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/input_file.h"

namespace agentkv {

namespace {

Error os_error(const char* what, const std::string& path, int err) {
  return make_error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                    std::string(what) + " " + path + ": " + std::strerror(err));
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path, int64_t max_bytes) {
  // InputFile refuses what is not a regular file (a FIFO never blocks the open) and files over the bound.
  InputFile in;
  AGENTKV_ASSIGN_OR_RETURN(in, InputFile::open(path, max_bytes, "cannot open"));
  const int fd = in.fd();
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(in.size());
  // mmap rejects length 0, and an empty file needs no mapping.
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return os_error("cannot mmap", path, errno);
    f.data_ = static_cast<const uint8_t*>(p);
  }
  // The mapping keeps the file alive; `in` closes the descriptor.
  return f;
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace agentkv
