// mori_torch.hpp - the torch adapter: torch 2.11's SymmetricMemory and
// SymmetricMemoryAllocator implemented over mori-symm's C API, registered as
// the "MORI" backend.  No CUDA or HIP header is included: streams reach the
// shim as c10::Stream::native_handle().
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mori_c.hpp"

namespace mori_torch {

namespace symm = c10d::symmetric_memory;

// What a group name resolves to: this process's place in it and the store
// its ranks share.
struct Group {
  int rank;
  int world_size;
  c10::intrusive_ptr<c10d::Store> store;
};

// Registered process groups first (resolve_process_group), then groups set
// with set_group_info; throws naming the group if neither knows it.
Group resolve_group(const std::string& name);

// A mori_store over a c10d::Store; the caller destroys it with ->destroy.
mori_store* wrap_store(c10::intrusive_ptr<c10d::Store> store);

// One rendezvoused (block, group): a snapshot of the core window's tables,
// taken once, so that accessors never touch the core.  `live` is the core
// window while it exists; free() and release_all() null it, after which
// only the signal calls (which need it) fail.
struct Window {
  mori_window* live = nullptr;
  std::string group;
  int rank = 0, world_size = 0, device = 0;
  size_t buffer_size = 0, signal_pad_size = 0, stride = 0;
  int handle_type = 0;
  bool direct_access = false;
  void* span = nullptr;
  std::vector<void*> buffer_ptrs, signal_pad_ptrs;
  void** buffer_ptrs_dev = nullptr;
  void** signal_pad_ptrs_dev = nullptr;
};

// The handle torch gets from rendezvous: a window plus this tensor's byte
// offset in the block (MemPool hands out interior pointers).
class MoriSymmetricMemory final : public symm::SymmetricMemory {
 public:
  MoriSymmetricMemory(std::shared_ptr<Window> window, size_t offset);

  std::vector<void*> get_buffer_ptrs() override;
  std::vector<void*> get_signal_pad_ptrs() override;
  void** get_buffer_ptrs_dev() override;
  void** get_signal_pad_ptrs_dev() override;
  size_t get_buffer_size() override;
  size_t get_offset() override;

  bool has_multicast_support() override;
  void* get_multicast_ptr() override;

  void barrier(int channel, size_t timeout_ms) override;
  void put_signal(int dst_rank, int channel, size_t timeout_ms) override;
  void wait_signal(int src_rank, int channel, size_t timeout_ms) override;

  int get_rank() override;
  int get_world_size() override;
  c10::Device get_device() override;
  bool world_within_direct_access() override;

  const Window& window() const { return *window_; }

 private:
  std::shared_ptr<Window> window_;
  size_t offset_;
};

// The allocator torch calls.  One immortal instance per process (see
// allocator()); every method is safe to call from any thread.
class MoriAllocator final : public symm::SymmetricMemoryAllocator {
 public:
  void* alloc(size_t size, int device_idx,
              const std::optional<std::string>& group_name) override;
  void free(void* ptr) override;
  size_t get_alloc_size(void* ptr) override;
  c10::intrusive_ptr<symm::SymmetricMemory> rendezvous(
      void* ptr, const std::optional<std::string>& group_name) override;
  bool has_multicast_support(int device_idx) override;
  c10::DeviceType supported_device_type() override;
  std::string name() override;
#ifdef MORI_TORCH_HAS_ALLOCATION
  bool has_allocation(void* ptr) override;
#endif

  // The shim backend to bring up before the first GPU call ("cuda", "hip",
  // "sim"); mori.allocator passes the one matching torch's build.
  void prefer_shim(const std::string& name);
  // Brings the shim up (if no allocation has yet) and names its backend.
  std::string shim_backend();
  // Tears every window and block down (the atexit path); afterwards torch's
  // frees of blocks it still holds are quietly ignored.
  void release_all();
  // Runs call(window, stream) on a live window under the allocator's lock,
  // with the window's device current and torch's current stream for it;
  // throws with mori_last_error() if the call fails.
  void on_stream(const Window& w, const char* what,
                 const std::function<int(mori_window*, void*)>& call);
  long adapter_cache_hits();

 private:
  struct Block {
    std::optional<std::string> default_group;  // from alloc; rendezvous may override
    int device;
  };
  using WindowKey = std::pair<void*, std::string>;  // (block base, group)

  void ensure_shim();
  std::shared_ptr<Window> rendezvous_new(void* base, const std::string& group, int device);
  void forget_block(void* base);

  std::mutex mutex_;
  std::map<void*, Block> blocks_;
  std::map<WindowKey, std::shared_ptr<Window>> windows_;
  std::string shim_ = "auto";
  bool shim_ready_ = false;
  long releases_ = 0;
  long cache_hits_ = 0;
};

// The process's allocator: created at load, never destroyed (torch's
// registry holds a reference past our static destructors).
MoriAllocator& allocator();

// "fabric" / "posix_fd" for a window's handle type.
const char* handle_type_name(int handle_type);

}  // namespace mori_torch
