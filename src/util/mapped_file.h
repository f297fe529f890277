// Read-only memory map of a whole file. Model weights are used straight from the map, so the
// loader never copies gigabytes and the OS page cache is shared between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace agentkv {

class MappedFile {
 public:
  // Errors read "cannot open FILE: <strerror>" (or mmap in place of open), "cannot open FILE: a
  // directory, not a regular file" (any special file, through InputFile) or name the size bound.
  static Result<MappedFile> open(const std::string& path, int64_t max_bytes);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // nullptr for an empty file.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace agentkv
