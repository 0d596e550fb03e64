// mori_torch.hpp - the torch adapter: torch 2.11's SymmetricMemory and
// SymmetricMemoryAllocator implemented over mori-symm's C API, registered as
// the "MORI" backend.  No CUDA or HIP header is included: streams reach the
// shim as c10::Stream::native_handle().
//
// Lifetime: every handle torch gets holds one reference on its core window
// (mori_window_retain / mori_window_release); free() of the block drops the
// handles the adapter's table holds (one per group, at the block's base)
// and then is mori_symm_free(), which the core defers while a window of the
// block is referenced.  So the memory goes when the last of {tensor
// storage, handles} lets go, and the adapter keeps no count of its own.
//
// Locking: one mutex guards the adapter's tables and nothing else.  The
// collective part of a rendezvous, store waits, signals and every GPU call
// run without it, so torch's frees (storage deleters, on any thread) never
// wait for a rendezvous.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
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

// When the core's rendezvous touched the store, as the store wrapper saw it
// (microseconds on the core's clock, 0 = never).  The core's store entries
// are mori_symm/<group>/<seq>/<what>/<rank>; "req" and "mapped" mark its
// phases: publish the request, gather the peers', import and map, then the
// barrier on "mapped".
struct StoreTimes {
  double first_req_set = 0, last_req_got = 0, mapped_set = 0, last_mapped_got = 0;
  double wait_us = 0;  // inside store calls that waited for a key
  long calls = 0;
};

// A mori_store over a c10d::Store; times (optional) is filled as the core
// calls it.  The caller destroys it with ->destroy.
mori_store* wrap_store(c10::intrusive_ptr<c10d::Store> store, StoreTimes* times);

// Where one new rendezvous spent its time (microseconds), from the adapter
// and from the store calls of the core.
struct RendezvousTrace {
  std::string group;
  int rank = -1, world_size = 0;
  double total_us = 0, resolve_us = 0, core_us = 0;
  double publish_us = 0, requests_us = 0, map_us = 0, mapped_barrier_us = 0, tail_us = 0;
  double store_wait_us = 0;
  long store_calls = 0;
};

// The handle torch gets from rendezvous: one reference on a core window plus
// this tensor's byte offset in the block (MemPool hands out interior
// pointers).  Accessors read the core window; it lives as long as the handle
// does, even after free() of its block.
class MoriSymmetricMemory final : public symm::SymmetricMemory {
 public:
  // Takes a reference on window (throws if the core refuses it).
  MoriSymmetricMemory(mori_window* window, std::string group, size_t offset);
  ~MoriSymmetricMemory() override;

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

  // False once the core tore the window down, which only release_all()
  // does to a referenced window: then every accessor throws.
  bool live() const;
  // The window, or throws with the core's reason if it was torn down.
  mori_window* window(const char* what) const;
  const std::string& group() const { return group_; }

 private:
  // Runs call(window, stream) with the window's device current and torch's
  // current stream for it; throws with mori_last_error() if it fails.
  template <typename Call>
  void on_stream(const char* what, Call call);

  mori_window* window_;
  std::string group_;
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
  // "sim"); mori_symm passes the one matching torch's build.
  void prefer_shim(const std::string& name);
  // Brings the shim up (if no allocation has yet) and names its backend.
  std::string shim_backend();
  // Tears every window and block down (the atexit path).  Handles taken
  // before stop being live; torch's later frees of its blocks are ignored.
  void release_all();
  long adapter_cache_hits();
  RendezvousTrace last_rendezvous();
  // Heals every live window of group after the death of its rank dead_rank
  // (mori_window_heal), in the order they were made, which is the order a
  // replacement's rendezvous join them; waits up to wait_ms for the dead
  // rank's process to be gone first.  Returns how many windows healed.
  int heal(const std::string& group, int dead_rank, int wait_ms);

 private:
  // A (block, group) that has rendezvoused.  The core window stays valid
  // while the block is in blocks_: the core tears windows down only with
  // their block, and handles hold references of their own.  whole is the
  // handle of the block's base (offset 0), made at its rendezvous and held
  // by the table until free(): the rendezvous torch's ops repeat on every
  // call returns it, one reference count up, as torch's backend returns the
  // block's cached peer information.
  struct Window {
    std::string group;
    mori_window* core;
    c10::intrusive_ptr<MoriSymmetricMemory> whole;
  };
  struct Block {
    size_t size;
    int device;
    std::optional<std::string> default_group;  // from alloc; rendezvous may name another
    std::vector<Window> windows;               // a handful of groups at most
  };

  void ensure_shim();
  // Caller holds mutex_.  The block whose [base, base + size) holds ptr.
  Block* covering(void* ptr, void** base);
  c10::intrusive_ptr<symm::SymmetricMemory> rendezvous_new(void* base, size_t offset,
                                                           const std::string& group,
                                                           int device);

  std::mutex mutex_;  // blocks_, cache_hits_, last_, made_ only
  std::map<void*, Block> blocks_;
  // Per group, its windows in the order they were made (heal's order).
  std::map<std::string, std::vector<mori_window*>> made_;
  long cache_hits_ = 0;
  RendezvousTrace last_;

  std::mutex shim_mutex_;  // shim_, shim_ready_: bring-up happens once
  std::string shim_ = "auto";
  bool shim_ready_ = false;

  std::atomic<bool> released_{false};  // release_all() ran
};

// The process's allocator: created at load, never destroyed (torch's
// registry holds a reference past our static destructors).
MoriAllocator& allocator();

// "fabric" / "posix_fd" for a window's handle type.
const char* handle_type_name(int handle_type);

// How a thread lets go of the interpreter while a rendezvous waits for its
// peers, and takes it back: leave() returns what resume() needs.  module.cpp
// installs the GIL's when the extension loads, so that the allocator itself
// knows nothing of Python; without hooks nothing is let go.
struct WaitHooks {
  void* (*leave)() = nullptr;
  void (*resume)(void* saved) = nullptr;
};
void set_wait_hooks(WaitHooks hooks);

// A steady clock in microseconds, for the adapter's phase timings.
double now_us();

// The text of an error or warning, formatted with printf's rules.  Every
// TORCH_CHECK / TORCH_WARN of the adapter takes exactly one C string made
// here: a number or pointer given to c10::str would be inserted into a
// std::ostream inside this extension, and on the GPU host that crashed the
// process (SIGSEGV) where the same insertion inside libtorch did not
// (docs/torch.md, "Messages").  ctest torch.adapter_formats_no_numbers keeps
// the adapter's objects free of numeric stream insertion.
std::string message(const char* format, ...) __attribute__((format(printf, 1, 2)));

// MORI_SYMM_DEBUG at INFO or above: the adapter logs its phase timings.
bool log_info();

}  // namespace mori_torch
