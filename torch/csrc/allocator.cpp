// allocator.cpp - the "MORI" SymmetricMemoryAllocator.  alloc / free /
// lookup are the core's blocks; rendezvous resolves the group, lends the
// core its store and caches the window per (block, group), so the
// rendezvous torch's ops make on every call is one map lookup.  Registered
// with register_availability when the extension is loaded.
#include "mori_torch.hpp"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace mori_torch {

namespace {

c10::Device cuda(int index) {
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

// ROCm torch uses DeviceType::CUDA too.
const c10::impl::DeviceGuardImplInterface* runtime() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

std::shared_ptr<Window> snapshot(mori_window* w, const std::string& group) {
  auto win = std::make_shared<Window>();
  size_t n = static_cast<size_t>(mori_window_world_size(w));
  win->live = w;
  win->group = group;
  win->rank = mori_window_rank(w);
  win->world_size = mori_window_world_size(w);
  win->device = mori_window_device(w);
  win->buffer_size = mori_window_buffer_size(w);
  win->signal_pad_size = mori_window_signal_pad_size(w);
  win->handle_type = mori_window_handle_type(w);
  win->direct_access = mori_window_world_within_direct_access(w) != 0;
  win->span = mori_window_span(w, &win->stride);
  void* const* buffers = mori_window_buffer_ptrs(w);
  void* const* pads = mori_window_signal_pad_ptrs(w);
  win->buffer_ptrs.assign(buffers, buffers + n);
  win->signal_pad_ptrs.assign(pads, pads + n);
  win->buffer_ptrs_dev = static_cast<void**>(mori_window_buffer_ptrs_dev(w));
  win->signal_pad_ptrs_dev = static_cast<void**>(mori_window_signal_pad_ptrs_dev(w));
  return win;
}

}  // namespace

const char* handle_type_name(int handle_type) {
  switch (handle_type) {
    case hipMemHandleTypeFabric:
      return "fabric";
    case hipMemHandleTypePosixFileDescriptor:
      return "posix_fd";
    default:
      return "unknown";
  }
}

void MoriAllocator::prefer_shim(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  shim_ = name;
}

// Caller holds mutex_.  Selecting explicitly (rather than letting the first
// shim call pick "auto") binds the shim to the runtime torch was built for.
void MoriAllocator::ensure_shim() {
  if (shim_ready_) return;
  TORCH_CHECK(mori_shim_select(shim_.c_str()) == 0, "MORI: ", mori_shim_message());
  shim_ready_ = true;
}

std::string MoriAllocator::shim_backend() {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_shim();
  return mori_shim_backend();
}

void* MoriAllocator::alloc(size_t size, int device_idx,
                           const std::optional<std::string>& group_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_shim();
  int device = device_idx >= 0 ? device_idx : runtime()->getDevice().index();
  // Read at every allocation, as torch's own backend does: a
  // set_signal_pad_size() affects the allocations after it.
  mori_symm_set_signal_pad_size(symm::get_signal_pad_size());
  // The core makes the block's device current; the guard restores torch's.
  c10::DeviceGuard guard(cuda(device));
  void* ptr = nullptr;
  // A zero-element tensor still gets a (one-byte) block, so that its
  // rendezvous works like any other.
  TORCH_CHECK(mori_symm_alloc(size > 0 ? size : 1, device, &ptr) == 0, mori_last_error());
  blocks_[ptr] = Block{group_name, device};
  return ptr;
}

// Never throws: torch calls this from storage deleters and from the caching
// allocator, where an exception would terminate the process.
void MoriAllocator::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (blocks_.find(ptr) == blocks_.end()) {
    // After release_all() torch still frees what it holds; those are gone.
    if (releases_ == 0)
      std::fprintf(stderr, "[mori-symm] free(%p): not a block this allocator returned\n", ptr);
    return;
  }
  forget_block(ptr);
  if (mori_symm_free(ptr) != 0) std::fprintf(stderr, "[mori-symm] %s\n", mori_last_error());
}

size_t MoriAllocator::get_alloc_size(void* ptr) {
  size_t size = 0;
  TORCH_CHECK(mori_symm_lookup(ptr, &size, nullptr) == 0, mori_last_error());
  return size;
}

c10::intrusive_ptr<symm::SymmetricMemory> MoriAllocator::rendezvous(
    void* ptr, const std::optional<std::string>& group_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t buffer_size = 0, offset = 0;
  if (mori_symm_lookup(ptr, &buffer_size, &offset) != 0) {
    // torch's contract: None for memory that is not symmetric (its ops
    // test tensors this way).
    TORCH_WARN("MORI rendezvous: ", mori_last_error(),
               "; is the tensor allocated from SymmetricMemory?");
    return nullptr;
  }
  void* base = static_cast<char*>(ptr) - offset;
  auto found = blocks_.find(base);
  TORCH_CHECK(found != blocks_.end(), "MORI rendezvous: block ", base, " is not this allocator's");
  const Block& block = found->second;
  // An empty name means "the group given at allocation", as in torch's backend.
  std::string group = group_name.value_or("");
  if (group.empty()) {
    TORCH_CHECK(block.default_group.has_value() && !block.default_group->empty(),
                "MORI rendezvous: `group_name` is neither specified during allocation "
                "nor passed to rendezvous()");
    group = *block.default_group;
  }
  auto it = windows_.find({base, group});
  if (it != windows_.end()) {
    cache_hits_++;
    return c10::make_intrusive<MoriSymmetricMemory>(it->second, offset);
  }
  auto win = rendezvous_new(base, group, block.device);
  windows_.emplace(WindowKey{base, group}, win);
  return c10::make_intrusive<MoriSymmetricMemory>(win, offset);
}

// Caller holds mutex_.  The collective part: every rank of the group calls
// it for the same block, in the same order per group.
std::shared_ptr<Window> MoriAllocator::rendezvous_new(void* base, const std::string& group,
                                                      int device) {
  Group g = resolve_group(group);
  TORCH_CHECK(g.store, "MORI rendezvous: group '", group, "' has no store");
  mori_store* store = wrap_store(g.store);
  mori_window* w = nullptr;
  int rc;
  {
    c10::DeviceGuard guard(cuda(device));
    rc = mori_symm_rendezvous(base, group.c_str(), g.rank, g.world_size, store, &w, nullptr);
  }
  store->destroy(store);
  TORCH_CHECK(rc == 0, mori_last_error());
  return snapshot(w, group);
}

// Caller holds mutex_.  The core tears the block's windows down with it;
// handles torch still holds keep their snapshot but lose the live window.
void MoriAllocator::forget_block(void* base) {
  blocks_.erase(base);
  auto it = windows_.lower_bound(WindowKey{base, std::string()});
  while (it != windows_.end() && it->first.first == base) {
    it->second->live = nullptr;
    it = windows_.erase(it);
  }
}

bool MoriAllocator::has_multicast_support(int /*device_idx*/) { return false; }

c10::DeviceType MoriAllocator::supported_device_type() { return c10::DeviceType::CUDA; }

std::string MoriAllocator::name() { return "MORI"; }

#ifdef MORI_TORCH_HAS_ALLOCATION
bool MoriAllocator::has_allocation(void* ptr) {
  return mori_symm_lookup(ptr, nullptr, nullptr) == 0;
}
#endif

void MoriAllocator::release_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& entry : windows_) entry.second->live = nullptr;
  windows_.clear();
  blocks_.clear();
  releases_++;
  TORCH_CHECK(mori_symm_release_all() == 0, mori_last_error());
}

void MoriAllocator::on_stream(const Window& w, const char* what,
                              const std::function<int(mori_window*, void*)>& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(w.live != nullptr, "MORI ", what, ": the window of group ", w.group,
              " is gone (its block was freed, or release_all() ran)");
  c10::DeviceGuard guard(cuda(w.device));
  void* stream = runtime()->getStream(cuda(w.device)).native_handle();
  TORCH_CHECK(call(w.live, stream) == 0, mori_last_error());
}

long MoriAllocator::adapter_cache_hits() {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_hits_;
}

MoriAllocator& allocator() {
  // Leaked on purpose: torch's registry holds a reference past this
  // library's static destructors, and frees can arrive during them.
  static MoriAllocator* instance = c10::make_intrusive<MoriAllocator>().release();
  return *instance;
}

namespace {

// Registration happens at load time, so the constructor does no GPU work.
[[maybe_unused]] const bool registered = [] {
  symm::register_availability(
      "MORI", c10::intrusive_ptr<symm::SymmetricMemoryAllocator>::unsafe_reclaim_from_nonowning(
                  &allocator()));
  return true;
}();

}  // namespace

}  // namespace mori_torch
