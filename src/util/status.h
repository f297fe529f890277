// Recoverable errors are values: a Result<T> holds either a T or an Error, and an Error is a code
// (what kind of failure, which callers map: to an HTTP status, an exit code) plus a message that
// names the problem (the field, the file, the limit). Callers branch on the code, never on the
// message. Invariants use AGENTKV_CHECK, which stays on in Release.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace agentkv {

// Set where the error originates; propagated unchanged by AGENTKV_TRY / AGENTKV_ASSIGN_OR_RETURN.
enum class ErrorCode : uint8_t {
  kInvalidArgument,    // the caller's input is wrong: a field, a flag, a value out of range
  kNotFound,           // no such model, agent, snapshot or file
  kConflict,           // the target exists but is busy or in the wrong state
  kTooLarge,           // over a size limit: a body, a prompt longer than the model's context
  kLimitReached,       // a configured count limit (agents held, connections); retry after freeing some
  kResourceExhausted,  // the KV budget cannot hold the request or the context
  kKvPinned,           // the budget could hold it, but retained (pinned) contexts hold too much now
  kUnavailable,        // the engine or server is shutting down
  kCancelled,          // the work was cancelled before it finished
  kDataLoss,           // a file or record is corrupt or truncated
  kInternal,           // an engine bug: an invariant a caller cannot fix was broken
};

// A stable lower-case name ("invalid_argument", "resource_exhausted", ...).
inline const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kTooLarge: return "too_large";
    case ErrorCode::kLimitReached: return "limit_reached";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kKvPinned: return "kv_pinned";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kDataLoss: return "data_loss";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

struct Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;
};

// Most errors are bad input (a request field, a flag, a file the user named), so that is the default;
// every other kind is given where it arises.
inline Error make_error(std::string msg) { return Error{ErrorCode::kInvalidArgument, std::move(msg)}; }
inline Error make_error(ErrorCode code, std::string msg) { return Error{code, std::move(msg)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error err) : v_(std::move(err)) {}          // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const std::string& error() const { return std::get<1>(v_).message; }
  ErrorCode code() const { return std::get<1>(v_).code; }
  const Error& status_error() const { return std::get<1>(v_); }
  Error take_error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Result<void> equivalent.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error err) : err_(std::move(err)), failed_(true) {}  // NOLINT
  static Status ok_status() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return err_.message; }
  ErrorCode code() const { return err_.code; }
  const Error& status_error() const { return err_; }

 private:
  Error err_;
  bool failed_ = false;
};

[[noreturn]] inline void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "agentkv: internal invariant failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace agentkv

#define AGENTKV_CHECK(cond) \
  ((cond) ? (void)0 : ::agentkv::check_failed(#cond, __FILE__, __LINE__))

// Propagate an error (its code and message) from a Result/Status-returning expression.
#define AGENTKV_TRY(expr)                                                        \
  do {                                                                           \
    auto _st = (expr);                                                           \
    if (!_st.ok()) return ::agentkv::Error(_st.status_error());                  \
  } while (0)

// Assign the value of a Result-returning expression to dst, or return its error.
#define AGENTKV_ASSIGN_OR_RETURN(dst, expr)                                      \
  do {                                                                           \
    auto _r = (expr);                                                            \
    if (!_r.ok()) return ::agentkv::Error(_r.status_error());                    \
    dst = std::move(*_r);                                                        \
  } while (0)
