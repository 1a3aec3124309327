#pragma once
// The one error type of fusekit. Messages name the argument and the expected vs actual value.
#include <concepts>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fusekit {

enum class ErrorKind {
  InvalidArgument,  // a caller's argument is wrong: shape, dtype, stride, alignment, pointer
  Unsupported,      // valid, but no backend here implements it
  NoDevice,         // the operation needs a CUDA device and there is none
  Cuda,             // the CUDA runtime reported an error
  Cublas,           // cuBLAS / cuBLASLt reported an error
  Profiler,         // CUPTI reported an error
};

std::string_view error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(compose(kind, message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  static std::string compose(ErrorKind kind, const std::string& message) {
    std::string out(error_kind_name(kind));
    out.append(": ").append(message);
    return out;
  }
  ErrorKind kind_;
};

// Throws InvalidArgument: "<arg>: expected <expected>, got <actual>".
[[noreturn]] void throw_invalid(std::string_view arg, std::string_view expected,
                                std::string_view actual);

namespace detail {
// NOTE: no fmt here: this header is included by .cu files, and nvcc rejects fmt's consteval
// format strings.
inline std::string to_text(std::string_view s) { return std::string(s); }
inline std::string to_text(const char* s) { return s; }
inline std::string to_text(const std::string& s) { return s; }
template <class T>
  requires std::integral<T> || std::floating_point<T>
std::string to_text(T v) {
  return std::to_string(v);
}
}  // namespace detail

template <class Expected, class Actual>
inline void require(bool ok, std::string_view arg, const Expected& expected,
                    const Actual& actual) {
  if (!ok) throw_invalid(arg, detail::to_text(expected), detail::to_text(actual));
}

// Throws fusekit::Error(Cuda) when `status` (a cudaError_t) is not cudaSuccess.
void check_cuda(int status, std::string_view what);
// Throws fusekit::Error(Cublas) when `status` (a cublasStatus_t) is not CUBLAS_STATUS_SUCCESS.
void check_cublas(int status, std::string_view what);
// Throws with the last launch error, if any (call right after a kernel launch).
void check_launch(std::string_view kernel);

}  // namespace fusekit
