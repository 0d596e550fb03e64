// symmetric_memory.cpp - the handle torch's ops and Python see: accessors
// answer from the window's snapshot; barrier / put_signal / wait_signal are
// stream memory operations on the pad's private counter area, enqueued on
// torch's current stream.  No multicast: HIP has no multicast API.
#include "mori_torch.hpp"

#include <climits>

namespace mori_torch {

namespace {

// torch passes 0 for "the default"; the core reads 0 the same way.
int timeout_arg(size_t timeout_ms) {
  return timeout_ms > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(timeout_ms);
}

}  // namespace

MoriSymmetricMemory::MoriSymmetricMemory(std::shared_ptr<Window> window, size_t offset)
    : window_(std::move(window)), offset_(offset) {
  TORCH_INTERNAL_ASSERT(offset_ < window_->buffer_size, "MORI: offset ", offset_,
                        " outside the ", window_->buffer_size, "-byte buffer");
}

std::vector<void*> MoriSymmetricMemory::get_buffer_ptrs() { return window_->buffer_ptrs; }

std::vector<void*> MoriSymmetricMemory::get_signal_pad_ptrs() {
  return window_->signal_pad_ptrs;
}

void** MoriSymmetricMemory::get_buffer_ptrs_dev() { return window_->buffer_ptrs_dev; }

void** MoriSymmetricMemory::get_signal_pad_ptrs_dev() { return window_->signal_pad_ptrs_dev; }

size_t MoriSymmetricMemory::get_buffer_size() { return window_->buffer_size; }

size_t MoriSymmetricMemory::get_offset() { return offset_; }

bool MoriSymmetricMemory::has_multicast_support() { return false; }

void* MoriSymmetricMemory::get_multicast_ptr() { return nullptr; }

void MoriSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  allocator().on_stream(*window_, "barrier", [&](mori_window* w, void* stream) {
    return mori_window_barrier(w, channel, stream, timeout_arg(timeout_ms));
  });
}

void MoriSymmetricMemory::put_signal(int dst_rank, int channel, size_t timeout_ms) {
  allocator().on_stream(*window_, "put_signal", [&](mori_window* w, void* stream) {
    return mori_window_put_signal(w, dst_rank, channel, stream, timeout_arg(timeout_ms));
  });
}

void MoriSymmetricMemory::wait_signal(int src_rank, int channel, size_t timeout_ms) {
  allocator().on_stream(*window_, "wait_signal", [&](mori_window* w, void* stream) {
    return mori_window_wait_signal(w, src_rank, channel, stream, timeout_arg(timeout_ms));
  });
}

int MoriSymmetricMemory::get_rank() { return window_->rank; }

int MoriSymmetricMemory::get_world_size() { return window_->world_size; }

c10::Device MoriSymmetricMemory::get_device() {
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(window_->device));
}

bool MoriSymmetricMemory::world_within_direct_access() { return window_->direct_access; }

}  // namespace mori_torch
