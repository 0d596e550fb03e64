#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace c10d::symmetric_memory {

class SymmetricMemory : public torch::CustomClassHolder {
 public:
  ~SymmetricMemory() override = default;
  virtual std::vector<void*> get_buffer_ptrs() = 0;
  virtual std::vector<void*> get_signal_pad_ptrs() = 0;
  virtual void** get_buffer_ptrs_dev() = 0;
  virtual void** get_signal_pad_ptrs_dev() = 0;
  virtual size_t get_buffer_size() = 0;
  virtual size_t get_offset() = 0;
  virtual bool has_multicast_support() = 0;
  virtual void* get_multicast_ptr() = 0;
  virtual void barrier(int channel, size_t timeout_ms) = 0;
  virtual void put_signal(int dst_rank, int channel, size_t timeout_ms) = 0;
  virtual void wait_signal(int src_rank, int channel, size_t timeout_ms) = 0;
  virtual int get_rank() = 0;
  virtual int get_world_size() = 0;
  virtual c10::Device get_device() = 0;
  virtual const std::vector<int>& get_rank_to_global_rank() { TORCH_CHECK(false, "NYI"); }
  virtual int* get_rank_to_global_rank_dev() { TORCH_CHECK(false, "NYI"); }
  virtual bool world_within_direct_access() { TORCH_CHECK(false, "NYI"); }
};

class SymmetricMemoryAllocator : public c10::intrusive_ptr_target {
 public:
  ~SymmetricMemoryAllocator() override = default;
  virtual void* alloc(size_t size, int device_idx,
                      const std::optional<std::string>& group_name) = 0;
  virtual void free(void* ptr) = 0;
  virtual size_t get_alloc_size(void* ptr) = 0;
  virtual c10::intrusive_ptr<SymmetricMemory> rendezvous(
      void* ptr, const std::optional<std::string>& group_name) = 0;
  virtual bool has_multicast_support(int device_idx) = 0;
  virtual c10::DeviceType supported_device_type() = 0;
  virtual std::string name() = 0;
  virtual bool has_allocation(void* ptr) { return false; }
};

void register_availability(const std::string& name,
                           c10::intrusive_ptr<SymmetricMemoryAllocator> allocator);

struct GroupInfo {
  int rank;
  int world_size;
  c10::intrusive_ptr<c10d::Store> store;
};
GroupInfo& get_group_info(const std::string& group_name);

size_t get_signal_pad_size();

}  // namespace c10d::symmetric_memory
