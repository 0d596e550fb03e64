// c10/standin.h - the few pieces of c10 the torch adapter uses, with torch
// 2.11's names and signatures, so that its sources build and run in CI
// without torch (tests/torch).  Not torch: only what the adapter touches.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace c10 {

class intrusive_ptr_target {
 public:
  virtual ~intrusive_ptr_target() = default;
  std::atomic<size_t> refcount_{0};
};

template <class T>
class intrusive_ptr {
 public:
  intrusive_ptr() noexcept = default;
  intrusive_ptr(std::nullptr_t) noexcept {}
  intrusive_ptr(const intrusive_ptr& o) : p_(o.p_) { retain(); }
  intrusive_ptr(intrusive_ptr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  template <class U>
  intrusive_ptr(intrusive_ptr<U>&& o) noexcept : p_(o.release()) {}
  template <class U>
  intrusive_ptr(const intrusive_ptr<U>& o) : p_(o.get()) { retain(); }
  ~intrusive_ptr() { reset(); }
  intrusive_ptr& operator=(intrusive_ptr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  T* release() noexcept {
    T* r = p_;
    p_ = nullptr;
    return r;
  }
  void reset() {
    if (p_ != nullptr && --p_->refcount_ == 0) delete p_;
    p_ = nullptr;
  }
  size_t use_count() const noexcept { return p_ ? p_->refcount_.load() : 0; }
  static intrusive_ptr reclaim(T* p) {
    intrusive_ptr r;
    r.p_ = p;
    return r;
  }
  static intrusive_ptr unsafe_reclaim_from_nonowning(T* p) {
    intrusive_ptr r;
    r.p_ = p;
    r.retain();
    return r;
  }

 private:
  void retain() {
    if (p_ != nullptr) p_->refcount_++;
  }
  T* p_ = nullptr;
};

template <class T, class... Args>
intrusive_ptr<T> make_intrusive(Args&&... args) {
  T* p = new T(std::forward<Args>(args)...);
  p->refcount_ = 1;
  return intrusive_ptr<T>::reclaim(p);
}

class Error : public std::exception {
 public:
  explicit Error(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }
  const char* what_without_backtrace() const noexcept { return msg_.c_str(); }

 private:
  std::string msg_;
};
class TypeError : public Error {
  using Error::Error;
};
class DistError : public Error {
  using Error::Error;
};
class DistNetworkError : public DistError {
  using DistError::DistError;
};

template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
using DeviceIndex = int8_t;

struct Device {
  Device(DeviceType type, DeviceIndex index) : type_(type), index_(index) {}
  DeviceType type() const noexcept { return type_; }
  DeviceIndex index() const noexcept { return index_; }

 private:
  DeviceType type_;
  DeviceIndex index_;
};

struct Stream {
  void* native_handle() const { return nullptr; }  // the runtime's default stream
};

}  // namespace c10

namespace torch {
class CustomClassHolder : public c10::intrusive_ptr_target {};
}  // namespace torch

#define TORCH_CHECK(cond, ...) \
  do {                         \
    if (!(cond)) throw ::c10::Error(::c10::str("", ##__VA_ARGS__)); \
  } while (0)
#define TORCH_CHECK_TYPE(cond, ...) \
  do {                              \
    if (!(cond)) throw ::c10::TypeError(::c10::str("", ##__VA_ARGS__)); \
  } while (0)
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_WARN(...) std::fprintf(stderr, "Warning: %s\n", ::c10::str(__VA_ARGS__).c_str())
