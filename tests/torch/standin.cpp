// standin.cpp - the bodies behind the torch stand-in's declarations
// (standin/), and the helpers of standin.hpp.  Process groups are a table;
// stores are the launcher's file store; devices are a thread's number.
#include "standin.hpp"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/env.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "mori/error.h"

namespace {

thread_local c10::DeviceIndex current_device = 0;

struct CudaGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::Device getDevice() const override {
    return c10::Device(c10::DeviceType::CUDA, current_device);
  }
  c10::Stream getStream(c10::Device) const noexcept override { return c10::Stream(); }
};

std::mutex table_mutex;
std::map<std::string, c10::intrusive_ptr<c10d::ProcessGroup>> groups;
// A function-local static, as torch's AllocatorMap::get(): backends register
// from their own static initializers, in whatever order the link gives.
std::map<std::string, c10::intrusive_ptr<c10d::symmetric_memory::SymmetricMemoryAllocator>>&
allocators() {
  static auto* table = new std::map<std::string,
                                    c10::intrusive_ptr<c10d::symmetric_memory::SymmetricMemoryAllocator>>();
  return *table;
}
size_t signal_pad_size = 9216;

// The store calls a rendezvous makes, over the launcher's file store.
template <class Base>
class MoriBackedStore final : public Base {
 public:
  MoriBackedStore(mori_store* s, standin::StoreCalls* calls) : s_(s), calls_(calls) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    count();
    TORCH_CHECK(s_->set(s_, key.c_str(), value.data(), value.size()) == 0, mori_last_error());
  }
  std::vector<uint8_t> get(const std::string& key) override {
    count();
    std::vector<uint8_t> out;
    TORCH_CHECK(fetch(key, 30000, &out), "get: ", key, " not set within 30 s");
    return out;
  }
  int64_t add(const std::string& key, int64_t value) override {
    count();
    int64_t result = 0;
    TORCH_CHECK(s_->add(s_, key.c_str(), value, &result) == 0, mori_last_error());
    return result;
  }
  bool check(const std::vector<std::string>& keys) override {
    count();
    for (const std::string& k : keys) {
      note_check(k);
      if (!fetch(k, 0, nullptr)) return false;
    }
    return true;
  }
  void wait(const std::vector<std::string>& keys) override {
    wait(keys, std::chrono::milliseconds(30000));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    count();
    if (calls_ != nullptr) calls_->waits++;
    for (const std::string& k : keys)
      TORCH_CHECK(fetch(k, static_cast<int>(timeout.count()), nullptr), "Wait timeout");
  }

 private:
  void count() {
    if (calls_ != nullptr) calls_->calls++;
  }
  void note_check(const std::string& key) {
    if (calls_ == nullptr) return;
    double now = std::chrono::duration<double, std::micro>(
                     std::chrono::steady_clock::now().time_since_epoch())
                     .count();
    std::lock_guard<std::mutex> lock(calls_->mutex);
    standin::KeyChecks& k = calls_->checked[key];
    if (k.checks++ == 0) k.first_us = now;
    k.last_us = now;
  }
  // True if key is (or becomes, within timeout_ms) set.
  bool fetch(const std::string& key, int timeout_ms, std::vector<uint8_t>* out) {
    void* value = nullptr;
    size_t len = 0;
    int rc = s_->get(s_, key.c_str(), &value, &len, timeout_ms);
    if (rc == MORI_ETIMEDOUT) return false;
    TORCH_CHECK(rc == 0, mori_last_error());
    if (out != nullptr) out->assign(static_cast<uint8_t*>(value), static_cast<uint8_t*>(value) + len);
    std::free(value);
    return true;
  }

  mori_store* s_;
  standin::StoreCalls* calls_;
};

}  // namespace

namespace c10 {
DeviceGuard::DeviceGuard(Device device) : previous_(current_device) {
  current_device = device.index();
}
DeviceGuard::~DeviceGuard() { current_device = previous_; }
}  // namespace c10

namespace c10::impl {
const DeviceGuardImplInterface* getDeviceGuardImpl(DeviceType) {
  static CudaGuardImpl impl;
  return &impl;
}
}  // namespace c10::impl

namespace c10::utils {
std::optional<bool> check_env(const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr && std::strcmp(v, "1") == 0) return true;
  if (v != nullptr && std::strcmp(v, "0") == 0) return false;
  return std::nullopt;
}
}  // namespace c10::utils

namespace c10d {
c10::intrusive_ptr<Store> PrefixStore::getUnderlyingStore() { return store_; }

c10::intrusive_ptr<ProcessGroup> resolve_process_group(const std::string& group_name) {
  std::lock_guard<std::mutex> lock(table_mutex);
  auto it = groups.find(group_name);
  TORCH_CHECK(it != groups.end(), "Could not resolve the process group registered under the name ",
              group_name);
  return it->second;
}
}  // namespace c10d

namespace c10d::symmetric_memory {
void register_availability(const std::string& name,
                           c10::intrusive_ptr<SymmetricMemoryAllocator> allocator) {
  std::lock_guard<std::mutex> lock(table_mutex);
  allocators()[name] = std::move(allocator);
}

GroupInfo& get_group_info(const std::string& group_name) {
  TORCH_CHECK(false, "get_group_info: no group info associated with the group name ", group_name);
}

size_t get_signal_pad_size() { return signal_pad_size; }
}  // namespace c10d::symmetric_memory

namespace standin {

c10::intrusive_ptr<c10d::Store> store_over(mori_store* store, StoreCalls* calls, bool file_store) {
  if (file_store) return c10::make_intrusive<MoriBackedStore<c10d::FileStore>>(store, calls);
  return c10::make_intrusive<MoriBackedStore<c10d::Store>>(store, calls);
}

void add_group(const std::string& name, int rank, int size, c10::intrusive_ptr<c10d::Store> store) {
  std::lock_guard<std::mutex> lock(table_mutex);
  groups[name] = c10::make_intrusive<c10d::ProcessGroup>(std::move(store), rank, size);
}

c10d::symmetric_memory::SymmetricMemoryAllocator* registered(const std::string& name) {
  std::lock_guard<std::mutex> lock(table_mutex);
  auto it = allocators().find(name);
  return it == allocators().end() ? nullptr : it->second.get();
}

void set_signal_pad_size(size_t bytes) { signal_pad_size = bytes; }

}  // namespace standin
