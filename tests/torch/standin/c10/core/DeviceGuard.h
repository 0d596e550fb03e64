#pragma once
#include <c10/standin.h>

namespace c10 {
// torch's makes the device current and restores the previous one; the
// stand-in keeps the thread's device in getDeviceGuardImpl(CUDA) alone.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceIndex previous_;
};
}  // namespace c10
