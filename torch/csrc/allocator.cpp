// allocator.cpp - the "MORI" SymmetricMemoryAllocator.  alloc / free /
// lookups are the core's blocks plus a table of them; rendezvous resolves the
// group, lends the core its store and remembers the window per (block,
// group), so the rendezvous torch's ops make on every call is a table lookup
// and one window reference.  Registered with register_availability when the
// extension is loaded.
#include "mori_torch.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/env.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace mori_torch {

namespace {

c10::Device cuda(int index) {
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

// ROCm torch uses DeviceType::CUDA too.
const c10::impl::DeviceGuardImplInterface* runtime() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

// torch reads TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES at every rendezvous
// ("1" allows, as c10::utils::check_env reads it); so does MORI, and passes
// it to the core.  Unset leaves the core's own MORI_SYMM_ variable in charge.
void pass_overlapping_devices_on() {
  std::optional<bool> allow = c10::utils::check_env("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES");
  mori_symm_set_allow_overlapping_devices(allow.has_value() ? (*allow ? 1 : 0) : -1);
}

// The core's phases, from the times of its store calls.  A phase whose
// marks are missing (a world of one rank uses no store) reads 0.
void fill_phases(RendezvousTrace& t, const StoreTimes& s, double core_start, double core_end) {
  auto span = [](double from, double to) { return from > 0 && to > from ? to - from : 0.0; };
  double req_done = s.last_req_got > 0 ? s.last_req_got : s.first_req_set;
  double mapped_done = s.last_mapped_got > 0 ? s.last_mapped_got : s.mapped_set;
  t.publish_us = span(core_start, s.first_req_set);
  t.requests_us = span(s.first_req_set, req_done);
  t.map_us = span(req_done, s.mapped_set);
  t.mapped_barrier_us = span(s.mapped_set, mapped_done);
  t.tail_us = span(mapped_done, core_end);
  t.store_wait_us = s.wait_us;
  t.store_calls = s.calls;
}

WaitHooks wait_hooks;  // set once, when the extension loads

// The collective part of a rendezvous waits for the slowest rank, seconds
// at times; torch's binding calls it holding the GIL, which would stop every
// other Python thread (and the frees they make) for as long.  Let go here
// (through the hooks module.cpp installs) and taken back before returning
// or throwing.
class Waiting {
 public:
  Waiting() : saved_(wait_hooks.leave ? wait_hooks.leave() : nullptr) {}
  ~Waiting() {
    if (wait_hooks.resume) wait_hooks.resume(saved_);
  }
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;

 private:
  void* saved_;
};

void log_trace(const RendezvousTrace& t) {
  std::fprintf(stderr,
               "[mori-symm INFO rank %d group %s] rendezvous of %d ranks: %.0f us (resolve group "
               "%.0f; core %.0f = publish %.0f + peers' requests %.0f + exchange, import and map "
               "%.0f + mapped barrier %.0f + after %.0f; store waits %.0f us in %ld calls)\n",
               t.rank, t.group.c_str(), t.world_size, t.total_us, t.resolve_us, t.core_us,
               t.publish_us, t.requests_us, t.map_us, t.mapped_barrier_us, t.tail_us,
               t.store_wait_us, t.store_calls);
}

}  // namespace

void set_wait_hooks(WaitHooks hooks) { wait_hooks = hooks; }

std::string message(const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  int n = std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  if (n < 0) return std::string(format);
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string long_text(static_cast<size_t>(n) + 1, '\0');  // rare: a long store or group name
  va_start(ap, format);
  std::vsnprintf(&long_text[0], long_text.size(), format, ap);
  va_end(ap);
  long_text.resize(static_cast<size_t>(n));
  return long_text;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool log_info() {
  // The core's levels: WARN, INFO, TRACE; read once, as the core does.
  static const bool on = [] {
    const char* s = std::getenv("MORI_SYMM_DEBUG");
    return s != nullptr && (strcasecmp(s, "INFO") == 0 || strcasecmp(s, "TRACE") == 0);
  }();
  return on;
}

const char* handle_type_name(int handle_type) {
  switch (handle_type) {
    case MORI_HANDLE_TYPE_FABRIC:
      return "fabric";
    case MORI_HANDLE_TYPE_POSIX_FD:
      return "posix_fd";
    default:
      return "unknown";
  }
}

// At import: the runtime torch was built for, loaded and its entry points
// resolved, nothing called in it (mori_shim_load), so that the first
// allocation does not pay the library's loading and lookups.  A failure
// here says nothing: the bring-up names it at the first allocation.
void MoriAllocator::prefer_shim(const std::string& name) {
  std::lock_guard<std::mutex> lock(shim_mutex_);
  shim_ = name;
  double t0 = now_us();
  int rc = mori_shim_load(shim_.c_str());
  if (log_info())
    std::fprintf(stderr, "[mori-symm INFO] shim %s %s in %.0f us\n", shim_.c_str(),
                 rc == 0 ? "loaded" : "not loaded", now_us() - t0);
}

// Selecting explicitly (rather than letting the first shim call pick "auto")
// binds the shim to the runtime torch was built for.  Bring-up happens at
// the first allocation, never at import: initializing the driver in a
// process that may fork would break CUDA in its children (loading the
// library at import, above, initializes nothing).
void MoriAllocator::ensure_shim() {
  std::lock_guard<std::mutex> lock(shim_mutex_);
  if (shim_ready_) return;
  double t0 = now_us();
  TORCH_CHECK(mori_shim_select(shim_.c_str()) == 0, message("MORI: %s", mori_shim_message()).c_str());
  shim_ready_ = true;
  if (log_info())
    std::fprintf(stderr, "[mori-symm INFO] shim %s up in %.0f us\n", mori_shim_backend(),
                 now_us() - t0);
}

std::string MoriAllocator::shim_backend() {
  ensure_shim();
  return mori_shim_backend();
}

void* MoriAllocator::alloc(size_t size, int device_idx,
                           const std::optional<std::string>& group_name) {
  ensure_shim();
  int device = device_idx >= 0 ? device_idx : runtime()->getDevice().index();
  // Read at every allocation, as torch's own backend does: a
  // set_signal_pad_size() affects the allocations after it.
  mori_symm_set_signal_pad_size(symm::get_signal_pad_size());
  void* ptr = nullptr;
  double t0 = now_us();
  {
    // The core makes the block's device current; the guard restores torch's.
    c10::DeviceGuard guard(cuda(device));
    // Zeroed on torch's current stream of that device and not waited for:
    // the allocation blocks the host on no device work.  The block's first
    // rendezvous waits for the zeroing before any peer can write into it.
    void* stream = runtime()->getStream(cuda(device)).native_handle();
    // A zero-element tensor still gets a (one-byte) block, so that its
    // rendezvous works like any other.
    TORCH_CHECK(mori_symm_alloc_on_stream(size > 0 ? size : 1, device, stream, &ptr) == 0,
                mori_last_error());
  }
  if (log_info())
    std::fprintf(stderr, "[mori-symm INFO] alloc %zu bytes on device %d: %.0f us\n", size, device,
                 now_us() - t0);
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_[ptr] = Block{size, device, group_name, {}};
  return ptr;
}

// Never throws: torch calls this from storage deleters and from the caching
// allocator, where an exception would terminate the process.  The table
// entry goes under the mutex; the core's free (which tears down at once, or
// when the last handle lets go) runs outside it.
void MoriAllocator::free(void* ptr) {
  std::vector<c10::intrusive_ptr<MoriSymmetricMemory>> held;  // the table's handles
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) {
      // After release_all() torch still frees what it holds; those are gone.
      if (!released_.load())
        std::fprintf(stderr, "[mori-symm] free(%p): not a block this allocator returned\n", ptr);
      return;
    }
    for (Window& e : it->second.windows) {  // no longer the group's to heal
      auto& made = made_[e.group];
      made.erase(std::remove(made.begin(), made.end(), e.core), made.end());
      held.push_back(std::move(e.whole));
    }
    blocks_.erase(it);
  }
  // Let go before the free, outside the mutex: the free then tears the
  // block down at once unless the caller's own handles still hold it.
  held.clear();
  if (mori_symm_free(ptr) != 0) std::fprintf(stderr, "[mori-symm] %s\n", mori_last_error());
}

// As torch's backend: the pointer alloc() returned, nothing else.
size_t MoriAllocator::get_alloc_size(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(ptr);
  TORCH_CHECK(it != blocks_.end(),
              message("MoriAllocator::get_alloc_size: %p was not allocated by MoriAllocator::alloc",
                      ptr)
                  .c_str());
  return it->second.size;
}

MoriAllocator::Block* MoriAllocator::covering(void* ptr, void** base) {
  auto it = blocks_.upper_bound(ptr);  // first block above ptr
  if (it == blocks_.begin()) return nullptr;
  --it;
  uintptr_t offset = reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(it->first);
  // A zero-size block still covers its first byte.
  if (offset >= (it->second.size > 0 ? it->second.size : 1)) return nullptr;
  *base = it->first;
  return &it->second;
}

c10::intrusive_ptr<symm::SymmetricMemory> MoriAllocator::rendezvous(
    void* ptr, const std::optional<std::string>& group_name) {
  std::string group;  // copied only for a new rendezvous, which runs unlocked
  void* base = nullptr;
  int device = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Block* block = covering(ptr, &base);
    if (block == nullptr) {
      // torch's contract: None for memory that is not symmetric (its ops
      // test tensors this way), with the built-in backend's warning.
      TORCH_WARN(message("MORI rendezvous: %p is not within any SymmetricMemory allocation; is "
                         "the tensor allocated from SymmetricMemory?",
                         ptr)
                     .c_str());
      return nullptr;
    }
    // An empty name means "the group given at allocation", as in torch's
    // backend.
    const std::string* name = nullptr;
    if (group_name.has_value() && !group_name->empty()) {
      name = &*group_name;
    } else {
      TORCH_CHECK(block->default_group.has_value() && !block->default_group->empty(),
                  "MORI rendezvous: `group_name` is neither specified during allocation "
                  "nor passed to rendezvous()");
      name = &*block->default_group;
    }
    for (const Window& w : block->windows)
      if (w.group == *name) {
        cache_hits_++;
        if (ptr == base) return w.whole;
        return c10::make_intrusive<MoriSymmetricMemory>(
            w.core, w.group,
            static_cast<size_t>(static_cast<char*>(ptr) - static_cast<char*>(base)));
      }
    group = *name;
    device = block->device;
  }
  return rendezvous_new(base, static_cast<size_t>(static_cast<char*>(ptr) - static_cast<char*>(base)),
                        group, device);
}

// The collective part, without the mutex: every rank of the group calls it
// for the same block, in the same order per group.  The caller holds the
// tensor, so its block cannot be freed meanwhile.
c10::intrusive_ptr<symm::SymmetricMemory> MoriAllocator::rendezvous_new(void* base, size_t offset,
                                                                        const std::string& group,
                                                                        int device) {
  // Before the GIL goes: check_env may warn, and a warning may want Python.
  pass_overlapping_devices_on();
  Waiting waiting;
  RendezvousTrace trace;
  trace.group = group;
  double t0 = now_us();
  Group g = resolve_group(group);
  TORCH_CHECK(g.store, message("MORI rendezvous: group '%s' has no store", group.c_str()).c_str());
  trace.rank = g.rank;
  trace.world_size = g.world_size;
  trace.resolve_us = now_us() - t0;
  StoreTimes times;
  mori_store* store = wrap_store(g.store, &times);
  mori_window* w = nullptr;
  int rc;
  double c0, c1;
  {
    c10::DeviceGuard guard(cuda(device));
    c0 = now_us();
    rc = mori_symm_rendezvous(base, group.c_str(), g.rank, g.world_size, store, &w, nullptr);
    c1 = now_us();
  }
  // The message is thread-local: take it before anything else can touch it.
  std::string why = rc == 0 ? std::string() : std::string(mori_last_error());
  store->destroy(store);
  TORCH_CHECK(rc == 0, why.c_str());
  trace.core_us = c1 - c0;
  fill_phases(trace, times, c0, c1);

  c10::intrusive_ptr<symm::SymmetricMemory> handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(base);
    TORCH_CHECK(it != blocks_.end(),
                message("MORI rendezvous: block %p was freed while its rendezvous ran", base).c_str());
    // The core returns one window per (block, group): a rendezvous of the
    // same pair that raced this one may have recorded it (and its handle)
    // already.
    const Window* known = nullptr;
    for (const Window& e : it->second.windows)
      if (e.group == group) known = &e;
    if (known == nullptr) {
      it->second.windows.push_back(
          Window{group, w, c10::make_intrusive<MoriSymmetricMemory>(w, group, 0)});
      made_[group].push_back(w);
      known = &it->second.windows.back();
    }
    if (offset == 0)
      handle = known->whole;
    else
      handle = c10::make_intrusive<MoriSymmetricMemory>(w, group, offset);
    trace.total_us = now_us() - t0;
    last_ = trace;
  }
  if (log_info()) log_trace(trace);
  return handle;
}

bool MoriAllocator::has_multicast_support(int /*device_idx*/) { return false; }

c10::DeviceType MoriAllocator::supported_device_type() { return c10::DeviceType::CUDA; }

std::string MoriAllocator::name() { return "MORI"; }

#ifdef MORI_TORCH_HAS_ALLOCATION
// As torch's backend: true for a pointer alloc() returned.
bool MoriAllocator::has_allocation(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_.find(ptr) != blocks_.end();
}
#endif

int MoriAllocator::heal(const std::string& group, int dead_rank, int wait_ms) {
  std::vector<mori_window*> windows;
  {
    // free() takes a block's windows out of made_.
    std::lock_guard<std::mutex> lock(mutex_);
    windows = made_[group];
  }
  Group g = resolve_group(group);
  TORCH_CHECK(g.store, message("MORI heal: group '%s' has no store", group.c_str()).c_str());
  Waiting waiting;
  StoreTimes times;
  mori_store* store = wrap_store(g.store, &times);
  int healed = 0, rc = MORI_OK;
  std::string why;
  for (mori_window* w : windows) {
    c10::DeviceGuard guard(cuda(mori_window_device(w)));
    // The dead rank's process may take a moment to be reaped.
    double t0 = now_us();
    while ((rc = mori_window_heal(w, dead_rank, store)) == MORI_ESTATE &&
           std::strstr(mori_last_error(), "is alive") != nullptr &&
           now_us() - t0 < wait_ms * 1e3)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (rc != 0) {
      why = mori_last_error();
      break;
    }
    healed++;
  }
  store->destroy(store);
  TORCH_CHECK(rc == 0, why.c_str());
  return healed;
}

void MoriAllocator::release_all() {
  std::map<void*, Block> gone;  // its handles let go outside the mutex
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone.swap(blocks_);
    made_.clear();
    released_.store(true);
  }
  gone.clear();
  TORCH_CHECK(mori_symm_release_all() == 0, mori_last_error());
}

long MoriAllocator::adapter_cache_hits() {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_hits_;
}

RendezvousTrace MoriAllocator::last_rendezvous() {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_;
}

MoriAllocator& allocator() {
  // Leaked on purpose: torch's registry holds a reference past this
  // library's static destructors, and frees can arrive during them.
  static MoriAllocator* instance = c10::make_intrusive<MoriAllocator>().release();
  return *instance;
}

namespace {

// Registration happens at load time, so the constructor does no GPU work.
// torch keeps the last registration of a name, and AMD's mori registers a
// backend named "MORI" too: "MORI_SYMM" names this one whatever is loaded
// after it (docs/torch.md, "Beside AMD's mori").
[[maybe_unused]] const bool registered = [] {
  for (const char* name : {"MORI", "MORI_SYMM"})
    symm::register_availability(
        name, c10::intrusive_ptr<symm::SymmetricMemoryAllocator>::unsafe_reclaim_from_nonowning(
                  &allocator()));
  return true;
}();

}  // namespace

}  // namespace mori_torch
