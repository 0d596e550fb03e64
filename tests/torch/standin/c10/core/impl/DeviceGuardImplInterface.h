#pragma once
#include <c10/standin.h>

namespace c10::impl {
struct DeviceGuardImplInterface {
  virtual ~DeviceGuardImplInterface() = default;
  virtual Device getDevice() const = 0;
  virtual Stream getStream(Device) const noexcept = 0;
};
const DeviceGuardImplInterface* getDeviceGuardImpl(DeviceType type);
}  // namespace c10::impl
