// standin.hpp - what the adapter's tests need of the torch stand-in
// (standin/): process groups over the launcher's store, the allocator the
// adapter registered, and torch's global signal pad size.
#pragma once

#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "mori/store.h"

namespace standin {

// How often a key was check()ed, and when first and last (steady clock,
// microseconds): a poller's pace.
struct KeyChecks {
  long checks = 0;
  double first_us = 0, last_us = 0;
};

// Calls made through a store_over() store: all of them, and wait()s; and
// each key's check()s.
struct StoreCalls {
  std::atomic<long> calls{0}, waits{0};
  std::mutex mutex;
  std::map<std::string, KeyChecks> checked;
};
// A c10d::Store over a mori_store (the launcher's file store), counting
// into calls.  file_store: derive from c10d::FileStore, as the stores of
// torch's own tests do.
c10::intrusive_ptr<c10d::Store> store_over(mori_store* store, StoreCalls* calls, bool file_store);
// What c10d::resolve_process_group(name) answers from now on.
void add_group(const std::string& name, int rank, int size, c10::intrusive_ptr<c10d::Store> store);
// The allocator registered under name with register_availability (or null).
c10d::symmetric_memory::SymmetricMemoryAllocator* registered(const std::string& name);
void set_signal_pad_size(size_t bytes);

}  // namespace standin
