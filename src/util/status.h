// Recoverable errors are values: a Result<T> holds either a T or an error message that names the
// problem (the field, the file, the limit). Invariants use AGENTKV_CHECK, which stays on in Release.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace agentkv {

struct Error {
  std::string message;
};

inline Error make_error(std::string msg) { return Error{std::move(msg)}; }

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
  Error take_error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Result<void> equivalent.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error err) : err_(std::move(err.message)), failed_(true) {}  // NOLINT
  static Status ok_status() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return err_; }

 private:
  std::string err_;
  bool failed_ = false;
};

[[noreturn]] inline void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "agentkv: internal invariant failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace agentkv

#define AGENTKV_CHECK(cond) \
  ((cond) ? (void)0 : ::agentkv::check_failed(#cond, __FILE__, __LINE__))

// Propagate an error from a Result/Status-returning expression.
#define AGENTKV_TRY(expr)                                                        \
  do {                                                                           \
    auto _st = (expr);                                                           \
    if (!_st.ok()) return ::agentkv::make_error(std::string(_st.error()));       \
  } while (0)

// Assign the value of a Result-returning expression to dst, or return its error.
#define AGENTKV_ASSIGN_OR_RETURN(dst, expr)                                      \
  do {                                                                           \
    auto _r = (expr);                                                            \
    if (!_r.ok()) return ::agentkv::make_error(std::string(_r.error()));         \
    dst = std::move(*_r);                                                        \
  } while (0)
