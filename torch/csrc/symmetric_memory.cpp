// symmetric_memory.cpp - the handle torch's ops and Python see.  It holds
// one reference on its core window, so the window (and the memory behind it)
// outlives a free() of the tensor for as long as the handle lives.
// Accessors read the window; barrier / put_signal / wait_signal are stream
// memory operations on the window's private signal slot, enqueued on torch's
// current stream, with no lock of the adapter's held.  No multicast: HIP has
// no multicast API.
#include "mori_torch.hpp"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <climits>
#include <cstdio>

namespace mori_torch {

namespace {

// torch passes 0 for "the default"; the core reads 0 the same way.
int timeout_arg(size_t timeout_ms) {
  return timeout_ms > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(timeout_ms);
}

// The checks torch's backend makes before it launches a signal kernel, in
// its words, so that code (and tests) matching torch's messages match ours.
void check_peer(const char* what, int rank, int world_size) {
  TORCH_CHECK(rank >= 0 && rank < world_size,
              message("MORI %s: rank must be in [0, %d) (got %d)", what, world_size, rank).c_str());
}

void check_channel(const char* what, mori_window* w, int channel) {
  // A window without a pad has no channels; the core says so.
  if (mori_window_signal_pad_size(w) == 0) return;
  int channels = mori_window_max_channels(w);
  TORCH_CHECK(channel >= 0 && channel < channels,
              message("MORI %s: channel %d is out of range; the maximum supported channel is %d "
                      "(%zu-byte signal pad, %d ranks)",
                      what, channel, channels - 1, mori_window_signal_pad_size(w),
                      mori_window_world_size(w))
                  .c_str());
}

}  // namespace

MoriSymmetricMemory::MoriSymmetricMemory(mori_window* window, std::string group, size_t offset)
    : window_(window), group_(std::move(group)), offset_(offset) {
  // The offset is inside the block: the allocator found the block covering it.
  TORCH_CHECK(mori_window_retain(window_) == 0, mori_last_error());
}

// Never throws.  The last release of a freed block's windows tears it down
// here; a window release_all() already tore down just lets its struct go.
MoriSymmetricMemory::~MoriSymmetricMemory() {
  if (mori_window_release(window_) != 0)
    std::fprintf(stderr, "[mori-symm] releasing a handle of group %s: %s\n", group_.c_str(),
                 mori_last_error());
}

// The core's accessors answer -1 on a window that was torn down.
bool MoriSymmetricMemory::live() const { return mori_window_world_size(window_) >= 0; }

mori_window* MoriSymmetricMemory::window(const char* what) const {
  TORCH_CHECK(live(), message("MORI %s on a handle of group %s: %s", what, group_.c_str(),
                              mori_last_error())
                          .c_str());
  return window_;
}

template <typename Call>
void MoriSymmetricMemory::on_stream(const char* what, Call call) {
  mori_window* w = window(what);
  c10::Device device(c10::DeviceType::CUDA,
                     static_cast<c10::DeviceIndex>(mori_window_device(w)));
  c10::DeviceGuard guard(device);
  void* stream =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle();
  TORCH_CHECK(call(w, stream) == 0, mori_last_error());
}

std::vector<void*> MoriSymmetricMemory::get_buffer_ptrs() {
  mori_window* w = window("buffer_ptrs");
  void* const* p = mori_window_buffer_ptrs(w);
  return std::vector<void*>(p, p + mori_window_world_size(w));
}

std::vector<void*> MoriSymmetricMemory::get_signal_pad_ptrs() {
  mori_window* w = window("signal_pad_ptrs");
  void* const* p = mori_window_signal_pad_ptrs(w);
  return std::vector<void*>(p, p + mori_window_world_size(w));
}

void** MoriSymmetricMemory::get_buffer_ptrs_dev() {
  return static_cast<void**>(mori_window_buffer_ptrs_dev(window("buffer_ptrs_dev")));
}

void** MoriSymmetricMemory::get_signal_pad_ptrs_dev() {
  return static_cast<void**>(mori_window_signal_pad_ptrs_dev(window("signal_pad_ptrs_dev")));
}

size_t MoriSymmetricMemory::get_buffer_size() {
  return mori_window_buffer_size(window("buffer_size"));
}

size_t MoriSymmetricMemory::get_offset() { return offset_; }

bool MoriSymmetricMemory::has_multicast_support() { return false; }

void* MoriSymmetricMemory::get_multicast_ptr() { return nullptr; }

void MoriSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  check_channel("barrier", window("barrier"), channel);
  on_stream("barrier", [&](mori_window* w, void* stream) {
    return mori_window_barrier(w, channel, stream, timeout_arg(timeout_ms));
  });
}

void MoriSymmetricMemory::put_signal(int dst_rank, int channel, size_t timeout_ms) {
  mori_window* w = window("put_signal");
  check_channel("put_signal", w, channel);
  check_peer("put_signal", dst_rank, mori_window_world_size(w));
  on_stream("put_signal", [&](mori_window* win, void* stream) {
    return mori_window_put_signal(win, dst_rank, channel, stream, timeout_arg(timeout_ms));
  });
}

void MoriSymmetricMemory::wait_signal(int src_rank, int channel, size_t timeout_ms) {
  mori_window* w = window("wait_signal");
  check_channel("wait_signal", w, channel);
  check_peer("wait_signal", src_rank, mori_window_world_size(w));
  on_stream("wait_signal", [&](mori_window* win, void* stream) {
    return mori_window_wait_signal(win, src_rank, channel, stream, timeout_arg(timeout_ms));
  });
}

int MoriSymmetricMemory::get_rank() { return mori_window_rank(window("rank")); }

int MoriSymmetricMemory::get_world_size() { return mori_window_world_size(window("world_size")); }

c10::Device MoriSymmetricMemory::get_device() {
  return c10::Device(c10::DeviceType::CUDA,
                     static_cast<c10::DeviceIndex>(mori_window_device(window("device"))));
}

// Computed by the core from the peers' requests (see protocol.c): every peer
// mapped for load/store, which is what torch's backends mean by it.
bool MoriSymmetricMemory::world_within_direct_access() {
  return mori_window_world_within_direct_access(window("world_within_direct_access")) != 0;
}

}  // namespace mori_torch
