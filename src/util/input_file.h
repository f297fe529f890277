// The one way agentkv opens a path a user named for reading (CLI inputs, calibration and map files,
// model files through MappedFile). Only a regular file is accepted: a directory, FIFO, socket or
// device is refused by stat before any open (a FIFO's open would block until a writer comes), the
// open itself is O_NONBLOCK and the descriptor is checked again (the path may have been swapped in
// between), and every read stops at a size bound the caller gives (never an endless /dev/zero).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace agentkv {

class InputFile {
 public:
  // `what` names the input in errors: "<what> <path>: a directory, not a regular file",
  // "<what> <path>: 5000 bytes, over the 4096-byte limit". A missing file is kNotFound, one over
  // the bound kTooLarge, anything else kInvalidArgument.
  static Result<InputFile> open(const std::string& path, int64_t max_bytes, std::string_view what);

  InputFile() = default;
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }  // at open (fstat)

  // The whole content, read to end of file but never past max_bytes (a file that grew past the
  // bound since open is an error, not a silent cut).
  Result<std::string> read_all();

 private:
  void reset();

  int fd_ = -1;
  int64_t size_ = 0;
  int64_t max_bytes_ = 0;
  std::string where_;  // "<what> <path>"
};

// InputFile::open + read_all.
Result<std::string> read_input_file(const std::string& path, int64_t max_bytes, std::string_view what);

}  // namespace agentkv
