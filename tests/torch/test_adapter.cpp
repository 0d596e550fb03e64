// test_adapter.cpp - the torch adapter's own logic, in CI: its sources
// (torch/csrc) built over a stand-in of the torch API they use (standin/)
// and run on the sim shim, N forked ranks over the launcher's file store.
// torch itself calls the same entry points (alloc, free, rendezvous, the
// handle's virtuals); what a real torch adds is checked on a GPU host by
// torch/tests.  Each case is a behaviour torch's contract or issue #12
// asks of the adapter.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "mori_torch.hpp"
#include "mori/hip_shim.h"
#include "standin.hpp"

// Last: cmocka's macros (fail, skip) would break the C++ headers.
extern "C" {
#include "launch.h"
#include "mori_cmocka.h"
#include "rank_check.h"
}

namespace symm = c10d::symmetric_memory;
using Handle = c10::intrusive_ptr<symm::SymmetricMemory>;

namespace {

constexpr size_t MiB = 1 << 20;
standin::StoreCalls store_calls;

// What torch has once init_process_group and set_backend("MORI") ran: the
// group "world" over the launcher's store, and the allocator MORI registered.
symm::SymmetricMemoryAllocator* setup(const mori_rank_ctx* ctx, bool file_store = false) {
  mori_torch::allocator().prefer_shim("sim");
  standin::add_group("world", ctx->rank, ctx->world,
                     standin::store_over(ctx->store, &store_calls, file_store));
  return standin::registered("MORI");
}

bool raises(const std::function<void()>& call, const char* needle, std::string* what) {
  try {
    call();
  } catch (const std::exception& e) {
    *what = e.what();
    return std::strstr(e.what(), needle) != nullptr;
  }
  *what = "(nothing raised)";
  return false;
}

long ledger() { return mori_shim_registry_total(); }

mori_symm_stats core_stats() {
  mori_symm_stats s;
  mori_symm_stats_get(&s);
  return s;
}

uint32_t read32(const void* p) {
  uint32_t v = 0;
  (void)mori_hipMemcpy(&v, p, 4, hipMemcpyDeviceToHost);
  return v;
}

bool write32(void* p, uint32_t v) {
  return mori_hipMemcpy(p, &v, 4, hipMemcpyHostToDevice) == hipSuccess;
}

// A rank body: exceptions become the rank's failure message.
#define BODY(name)                                                                   \
  int name##_body(const mori_rank_ctx* ctx, char* msg, size_t msglen);              \
  int name(const mori_rank_ctx* ctx, char* msg, size_t msglen) {                     \
    try {                                                                            \
      return name##_body(ctx, msg, msglen);                                          \
    } catch (const std::exception& e) {                                              \
      std::snprintf(msg, msglen, "rank %d: %s", ctx->rank, e.what());                \
      return 1;                                                                      \
    }                                                                                \
  }                                                                                  \
  int name##_body(const mori_rank_ctx* ctx, char* msg, size_t msglen)

// torch's test_empty_strided_p2p: hdl = rendezvous(t); del t; the handle
// keeps working, and the memory goes with the handle.
BODY(handle_outlives_the_free_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  CHECK(a != nullptr, "MORI was not registered");
  (void)mori_torch::allocator().shim_backend();
  long before = ledger();
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle h = a->rendezvous(p, std::nullopt);  // the allocation's group
  CHECK(h, "rendezvous returned None");
  long held = ledger();
  a->free(p);  // torch's storage deleter, with the handle alive
  CHECK(core_stats().deferred == 1, "the freed block is not deferred (%ld)", core_stats().deferred);
  CHECK(ledger() == held, "free released resources (%ld -> %ld) a handle still holds", held,
        ledger());
  int peer = (ctx->rank + 1) % ctx->world, src = (ctx->rank + ctx->world - 1) % ctx->world;
  CHECK(write32(static_cast<uint32_t*>(h->get_buffer_ptrs()[peer]) + ctx->rank,
                0xC0DE0000u | static_cast<uint32_t>(ctx->rank)),
        "write into the peer: %s", mori_shim_message());
  h->put_signal(peer, 0, 0);
  h->wait_signal(src, 0, 0);
  h->barrier(1, 0);
  uint32_t got = read32(static_cast<uint32_t*>(h->get_buffer_ptrs()[ctx->rank]) + src);
  CHECK(got == (0xC0DE0000u | static_cast<uint32_t>(src)), "own buffer holds 0x%08x", got);
  h->barrier(1, 0);
  h.reset();  // the last owner
  mori_symm_stats st = core_stats();
  CHECK(st.deferred == 0 && st.windows == 0 && st.blocks == 0,
        "after the last handle: %ld deferred, %ld windows, %ld blocks", st.deferred, st.windows,
        st.blocks);
  CHECK(ledger() == before, "ledger %ld, %ld before the allocation", ledger(), before);
  snprintf(msg, msglen, "ok");
  return 0;
}

// The reverse: the tensor outlives its handle, and rendezvous again is the
// same window without the store.
BODY(tensor_outlives_its_handle_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle h = a->rendezvous(p, std::string("world"));
  std::vector<void*> first = h->get_buffer_ptrs();
  h.reset();
  long rendezvous = core_stats().rendezvous, calls = store_calls.calls;
  Handle again = a->rendezvous(p, std::string("world"));
  CHECK(again->get_buffer_ptrs() == first, "another window");
  CHECK(core_stats().rendezvous == rendezvous && store_calls.calls == calls,
        "rendezvous ran again after the handle went");
  again->barrier(0, 0);
  again.reset();
  a->free(p);
  CHECK(core_stats().blocks == 0 && core_stats().deferred == 0, "the block outlived its free");
  snprintf(msg, msglen, "ok");
  return 0;
}

// Cached: a lookup and a reference, no store call, no core rendezvous; the
// block's base gets the handle the table holds (no new handle, no window
// reference taken and let go per call, by name or by the allocation's
// group); an interior pointer gets its offset and the own entry stays the
// block's base.
BODY(cached_rendezvous_is_a_lookup_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle h = a->rendezvous(p, std::string("world"));
  long hits = mori_torch::allocator().adapter_cache_hits(), calls = store_calls.calls;
  long rendezvous = core_stats().rendezvous;
  for (int i = 0; i < 998; i++) (void)a->rendezvous(p, std::string("world"));
  CHECK(a->rendezvous(p, std::string("world")).get() == h.get(),
        "a cached rendezvous of the base made a new handle");
  CHECK(a->rendezvous(p, std::nullopt).get() == h.get(),
        "a cached rendezvous in the allocation's group made a new handle");
  Handle inner = a->rendezvous(static_cast<char*>(p) + 4096, std::string("world"));
  CHECK(mori_torch::allocator().adapter_cache_hits() - hits == 1001, "cache hits");
  CHECK(store_calls.calls == calls && core_stats().rendezvous == rendezvous,
        "a cached rendezvous touched the store or the core's rendezvous");
  CHECK(inner->get_offset() == 4096, "offset %zu", inner->get_offset());
  CHECK(inner->get_buffer_ptrs()[ctx->rank] == p, "the own entry is not the block's base");
  CHECK(inner->get_buffer_ptrs() == h->get_buffer_ptrs(), "an interior pointer got another window");
  h->barrier(0, 0);
  snprintf(msg, msglen, "ok");
  return 0;
}

// Issue #12: torch frees from storage deleters on any thread.  While rank 0's
// rendezvous waits for rank 1, another thread of rank 0 allocates, frees,
// looks up and rendezvouses (cached); rank 1 joins only after that thread
// is done.  A free that waited for the rendezvous would finish after it.
BODY(frees_do_not_wait_for_a_rendezvous_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* ready = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle ready_hdl = a->rendezvous(ready, std::nullopt);
  void* pending = a->alloc(MiB, ctx->rank, std::string("world"));
  if (ctx->rank != 0) {
    void* v = nullptr;
    size_t n = 0;
    CHECK(ctx->store->get(ctx->store, "test/other_thread_done", &v, &n, 20000) == 0,
          "rank 0's other thread never finished: %s", mori_last_error());
    std::free(v);
    (void)a->rendezvous(pending, std::nullopt);
    snprintf(msg, msglen, "ok");
    return 0;
  }
  std::atomic<int> order{0};
  int other_done = 0, rendezvous_done = 0;
  std::string other_error, rendezvous_error;
  long calls_before = store_calls.calls;
  std::thread other([&] {
    try {
      // Not before the rendezvous is under way: its first store call.
      for (int i = 0; i < 10000 && store_calls.calls == calls_before; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (store_calls.calls == calls_before) throw std::runtime_error("no rendezvous started");
      for (int i = 0; i < 5; i++) {
        void* x = a->alloc(MiB, ctx->rank, std::string("world"));
        if (!a->has_allocation(x) || a->get_alloc_size(x) != MiB) throw std::runtime_error("lookup");
        a->free(x);
      }
      if (a->rendezvous(ready, std::nullopt)->get_buffer_ptrs() != ready_hdl->get_buffer_ptrs())
        throw std::runtime_error("the cached rendezvous gave another window");
    } catch (const std::exception& e) {
      other_error = e.what();
    }
    other_done = ++order;
    mori_store* own = nullptr;  // a store handle of this thread's own
    if (mori_file_store_open(ctx->store_dir, &own) == 0) {
      (void)own->set(own, "test/other_thread_done", "1", 1);
      own->destroy(own);
    }
  });
  try {
    (void)a->rendezvous(pending, std::nullopt);
  } catch (const std::exception& e) {
    rendezvous_error = e.what();
  }
  rendezvous_done = ++order;
  other.join();
  CHECK(other_error.empty(), "the other thread: %s", other_error.c_str());
  CHECK(rendezvous_error.empty(), "the rendezvous: %s", rendezvous_error.c_str());
  CHECK(other_done < rendezvous_done,
        "the other thread's alloc/free/lookups finished after the rendezvous it should not wait for");
  snprintf(msg, msglen, "ok");
  return 0;
}

// torch's test_allow_overlapping_devices: every rank on device 0 with
// TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1; refused without it.
BODY(overlapping_devices_as_torch_says_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  setenv("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "1", 1);
  void* p = a->alloc(MiB, 0, std::string("world"));
  Handle h = a->rendezvous(p, std::nullopt);
  CHECK(h->get_rank() == ctx->rank && h->get_world_size() == ctx->world, "geometry");
  CHECK(h->get_device().index() == 0, "device %d", h->get_device().index());
  h->barrier(0, 0);
  setenv("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "0", 1);
  void* q = a->alloc(MiB, 0, std::string("world"));
  std::string what;
  CHECK(raises([&] { (void)a->rendezvous(q, std::nullopt); }, "both use device 0", &what),
        "with the variable at 0: %s", what.c_str());
  unsetenv("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES");
  a->free(q);
  snprintf(msg, msglen, "ok");
  return 0;
}

// torch's bounds, in torch's words, before anything reaches the core.
BODY(signal_bounds_in_torchs_words_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* p = a->alloc(4096, ctx->rank, std::string("world"));
  Handle h = a->rendezvous(p, std::nullopt);
  int channels = static_cast<int>(9216 / 4 / ctx->world);
  std::string what;
  CHECK(raises([&] { h->put_signal(ctx->world, 0, 0); }, "must be in [0", &what), "%s",
        what.c_str());
  CHECK(raises([&] { h->wait_signal(-1, 0, 0); }, "must be in [0", &what), "%s", what.c_str());
  CHECK(raises([&] { h->barrier(channels, 0); }, "maximum supported channel", &what), "%s",
        what.c_str());
  CHECK(raises([&] { h->put_signal(0, -1, 0); }, "maximum supported channel", &what), "%s",
        what.c_str());
  h->barrier(channels - 1, 0);
  snprintf(msg, msglen, "ok");
  return 0;
}

// release_all (the exit path): handles stop being live and say why; their
// destruction and torch's later frees are harmless.
BODY(release_all_ends_every_handle_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle h = a->rendezvous(p, std::nullopt);
  h->barrier(0, 0);
  mori_torch::allocator().release_all();
  auto* mh = dynamic_cast<mori_torch::MoriSymmetricMemory*>(h.get());
  CHECK(mh != nullptr && !mh->live(), "the handle is still live");
  std::string what;
  CHECK(raises([&] { (void)h->get_buffer_ptrs(); }, "release_all", &what), "%s", what.c_str());
  CHECK(raises([&] { h->barrier(0, 0); }, "release_all", &what), "%s", what.c_str());
  h.reset();
  a->free(p);  // torch frees what it held, after the fact
  CHECK(ledger() == 0, "ledger %ld after release_all", ledger());
  snprintf(msg, msglen, "ok");
  return 0;
}

// The phases of a rendezvous, from the store calls of the core; over a
// FileStore the wrapper polls check() instead of FileStore's 10 ms wait().
BODY(rendezvous_phases_are_timed_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx, /*file_store=*/true);
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  long waits = store_calls.waits;
  (void)a->rendezvous(p, std::nullopt);
  mori_torch::RendezvousTrace t = mori_torch::allocator().last_rendezvous();
  CHECK(t.group == "world" && t.rank == ctx->rank && t.world_size == ctx->world, "who");
  CHECK(t.total_us > 0 && t.core_us > 0 && t.core_us <= t.total_us, "total %.0f core %.0f",
        t.total_us, t.core_us);
  CHECK(t.store_calls > 0, "no store call seen");
  double parts = t.publish_us + t.requests_us + t.map_us + t.mapped_barrier_us + t.tail_us;
  CHECK(parts > 0 && parts <= t.core_us + 1, "phases %.0f of core %.0f", parts, t.core_us);
  CHECK(store_calls.waits == waits, "FileStore::wait() was used (%ld calls)",
        store_calls.waits - waits);
  snprintf(msg, msglen, "ok");
  return 0;
}

// How many checks a poller that pauses mori_store_backoff_us(waited) after
// each can make within t_us of its first: the pauses only grow, and a
// loaded machine only stretches them.
long backoff_checks(double t_us) {
  long n = 1;
  for (double at = mori_store_backoff_us(0); at <= t_us; at += mori_store_backoff_us(at)) n++;
  return n;
}

// A TCPStore's wait() that times out logs a c10d warning each time, and the
// core asks for keys in short slices: over any store the wrapper polls with
// check() and never calls wait(), and the polling backs off over the whole
// wait (a fixed 20 us poll would make thousands of checks).  Rank 1 comes
// late: only once rank 0's rendezvous has made 100 store calls (a thread
// of rank 0 counts them and says so through the store).  Every key rank 0
// polled was checked no more often than a backoff allows over the time it
// was polled, plus a check cut short at the end of each of the core's
// slices (2 ms at least).  A first rendezvous agrees the group's
// incarnation, where rank 0 answers joins in a loop of its own; the one
// measured is the second.
BODY(store_is_polled_never_waited_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* first = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle h0 = a->rendezvous(first, std::nullopt);
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  if (ctx->rank == 1) {
    void* v = nullptr;
    size_t n = 0;
    CHECK(ctx->store->get(ctx->store, "test/rank0_polled", &v, &n, 60000) == 0,
          "rank 0 never polled: %s", mori_last_error());
    std::free(v);
  }
  long waits = store_calls.waits, calls = store_calls.calls;
  {
    std::lock_guard<std::mutex> lock(store_calls.mutex);
    store_calls.checked.clear();
  }
  std::atomic<int> done{0};
  std::thread teller;
  if (ctx->rank == 0)
    teller = std::thread([&] {
      while (!done.load() && store_calls.calls - calls < 100) std::this_thread::yield();
      mori_store* own = nullptr;  // a store handle of this thread's own
      if (!done.load() && mori_file_store_open(ctx->store_dir, &own) == 0) {
        (void)own->set(own, "test/rank0_polled", "1", 1);
        own->destroy(own);
      }
    });
  Handle h = a->rendezvous(p, std::nullopt);
  done = 1;
  if (teller.joinable()) teller.join();
  h->barrier(0, 0);  // before any check can end this rank: its peer waits here
  CHECK(store_calls.waits == waits, "c10d::Store::wait() was called %ld time(s)",
        store_calls.waits - waits);
  std::lock_guard<std::mutex> lock(store_calls.mutex);
  for (const auto& [key, k] : store_calls.checked) {
    double polled_us = k.last_us - k.first_us;
    long most = backoff_checks(polled_us) + 2 * (1 + static_cast<long>(polled_us / 2000));
    CHECK(k.checks <= most, "%s checked %ld times in %.0f us (a backoff allows %ld)", key.c_str(),
          k.checks, polled_us, most);
  }
  snprintf(msg, msglen, "ok");
  return 0;
}

// torch's timeout tests: a barrier with timeout_ms that rank 1 never joins
// ends in an exception (torch's RuntimeError) naming rank 1, by the call
// or by the next signal call on the handle, and not at the test's own
// bound: the adapter hands timeout_ms to the core unchanged.
BODY(signal_timeout_raises_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  void* p = a->alloc(MiB, ctx->rank, std::string("world"));
  Handle h = a->rendezvous(p, std::nullopt);
  if (ctx->rank != 0) {
    void* v = nullptr;
    size_t n = 0;
    CHECK(ctx->store->get(ctx->store, "test/timeout_done", &v, &n, 30000) == 0,
          "rank 0 never finished: %s", mori_last_error());
    std::free(v);
    snprintf(msg, msglen, "ok");
    return 0;
  }
  std::string what;
  double t0 = mori_torch::now_us();
  bool raised = raises([&] {
    h->barrier(3, 500);
    mori_hipStreamSynchronize(nullptr);
    h->put_signal(0, 2, 0);  // the next call: needs no peer
  }, "never signalled", &what);
  double ms = (mori_torch::now_us() - t0) / 1e3;
  (void)ctx->store->set(ctx->store, "test/timeout_done", "1", 1);
  CHECK(raised, "the barrier's timeout: %s", what.c_str());
  CHECK(ms < 10000, "the error came after %.0f ms", ms);
  snprintf(msg, msglen, "ok");
  return 0;
}

// torch's contract for pointers and groups: an unknown pointer is None;
// without a group anywhere rendezvous raises; lookups take what alloc gave.
BODY(lookups_and_groups_rank) {
  symm::SymmetricMemoryAllocator* a = setup(ctx);
  int local = 0;
  CHECK(!a->rendezvous(&local, std::string("world")), "a foreign pointer got a handle");
  void* p = a->alloc(3 * MiB, ctx->rank, std::nullopt);
  std::string what;
  CHECK(raises([&] { (void)a->rendezvous(p, std::nullopt); }, "neither specified", &what), "%s",
        what.c_str());
  CHECK(a->get_alloc_size(p) == 3 * MiB, "size %zu", a->get_alloc_size(p));
  CHECK(raises([&] { (void)a->get_alloc_size(static_cast<char*>(p) + 1); }, "", &what),
        "an interior pointer has an allocation size");
  CHECK(a->has_allocation(p) && !a->has_allocation(static_cast<char*>(p) + 1), "has_allocation");
  Handle h = a->rendezvous(static_cast<char*>(p) + 3 * MiB - 1, std::string("world"));
  CHECK(h && h->get_offset() == 3 * MiB - 1, "the last byte's offset");
  CHECK(!a->rendezvous(static_cast<char*>(p) + 3 * MiB, std::string("world")),
        "the byte after the buffer got a handle");
  h->barrier(0, 0);
  snprintf(msg, msglen, "ok");
  return 0;
}

// torch keeps the last registration of a name and AMD's mori registers
// "MORI" too: the same allocator is also registered as "MORI_SYMM".
void registers_under_a_name_of_its_own(void**) {
  symm::SymmetricMemoryAllocator* mori = standin::registered("MORI");
  assert_non_null(mori);
  assert_ptr_equal(standin::registered("MORI_SYMM"), mori);
  assert_string_equal(mori->name().c_str(), "MORI");
}

void run(int world, mori_rank_fn fn) {
  mori_rank_result res[4];
  int failed = mori_launch(world, fn, nullptr, 60000, res);
  for (int r = 0; r < world; r++)
    if (res[r].hung || res[r].signal || res[r].exit_code != 0)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code, res[r].signal,
                  res[r].hung, res[r].msg);
  assert_int_equal(failed, 0);
}

void handle_outlives_the_free(void**) { run(2, handle_outlives_the_free_rank); }
void tensor_outlives_its_handle(void**) { run(2, tensor_outlives_its_handle_rank); }
void cached_rendezvous_is_a_lookup(void**) { run(2, cached_rendezvous_is_a_lookup_rank); }
void frees_do_not_wait_for_a_rendezvous(void**) { run(2, frees_do_not_wait_for_a_rendezvous_rank); }
void overlapping_devices_as_torch_says(void**) { run(2, overlapping_devices_as_torch_says_rank); }
void signal_bounds_in_torchs_words(void**) { run(2, signal_bounds_in_torchs_words_rank); }
void release_all_ends_every_handle(void**) { run(2, release_all_ends_every_handle_rank); }
void rendezvous_phases_are_timed(void**) { run(2, rendezvous_phases_are_timed_rank); }
void lookups_and_groups(void**) { run(2, lookups_and_groups_rank); }
void store_is_polled_never_waited(void**) { run(2, store_is_polled_never_waited_rank); }
void signal_timeout_raises(void**) { run(2, signal_timeout_raises_rank); }

}  // namespace

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(registers_under_a_name_of_its_own),
      cmocka_unit_test(handle_outlives_the_free),
      cmocka_unit_test(tensor_outlives_its_handle),
      cmocka_unit_test(cached_rendezvous_is_a_lookup),
      cmocka_unit_test(frees_do_not_wait_for_a_rendezvous),
      cmocka_unit_test(overlapping_devices_as_torch_says),
      cmocka_unit_test(signal_bounds_in_torchs_words),
      cmocka_unit_test(release_all_ends_every_handle),
      cmocka_unit_test(rendezvous_phases_are_timed),
      cmocka_unit_test(lookups_and_groups),
      cmocka_unit_test(store_is_polled_never_waited),
      cmocka_unit_test(signal_timeout_raises),
  };
  setenv("MORI_SIM_DEVICES", "4", 0);
  setenv("MORI_SYMM_TIMEOUT_MS", "5000", 0);
  return mori_run_tests(argc, argv, tests);
}
