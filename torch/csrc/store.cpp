// store.cpp - where a rendezvous meets its peers: a group name resolved to
// (rank, world size, store), and that c10d::Store seen as a mori_store.
// Store failures become MORI_E* codes with a message; nothing throws
// through the C core.  The wrapper also times the core's store calls, which
// is how the adapter sees the phases of a rendezvous.
#include "mori_torch.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace mori_torch {

Group resolve_group(const std::string& name) {
  std::string registry_why;
  try {
    auto pg = c10d::resolve_process_group(name);
    TORCH_CHECK(pg->getStore(), "MORI: process group '", name, "' has no store");
    return Group{pg->getRank(), pg->getSize(), pg->getStore()};
  } catch (const c10::Error& e) {
    registry_why = e.what_without_backtrace();
  }
  try {
    auto& info = symm::get_group_info(name);
    return Group{info.rank, info.world_size, info.store};
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "MORI rendezvous: group '", name,
                "' is neither a registered process group (", registry_why,
                ") nor set with set_group_info (", e.what_without_backtrace(), ")");
  }
}

namespace {

// The core sees only the mori_store base.
struct TorchStore : mori_store {
  c10::intrusive_ptr<c10d::Store> store;
  // FileStore::wait() sleeps in 10 ms slices (and measures its timeout in
  // whole seconds); on it a missing key is polled with check() instead.
  bool poll;
  StoreTimes* times;
};

TorchStore* of(mori_store* s) { return static_cast<TorchStore*>(s); }

bool is_file_store(c10::intrusive_ptr<c10d::Store> store) {
  // Groups' stores are PrefixStores over the default store, often twice.
  for (int depth = 0; store && depth < 8; depth++) {
    if (dynamic_cast<c10d::FileStore*>(store.get()) != nullptr) return true;
    auto* prefix = dynamic_cast<c10d::PrefixStore*>(store.get());
    if (prefix == nullptr) return false;
    store = prefix->getUnderlyingStore();
  }
  return false;
}

// "mori_symm/<group>/<incarnation>/<seq>/<what>/<rank>" -> what; the core's
// phases are marked by its "req" and "mapped" entries.
enum class Mark { other, req, mapped };

Mark mark_of(const char* key) {
  const char* last = std::strrchr(key, '/');
  if (last == nullptr || last == key) return Mark::other;
  const char* what = last - 1;
  while (what > key && what[-1] != '/') what--;
  size_t n = static_cast<size_t>(last - what);
  if (n == 3 && std::strncmp(what, "req", 3) == 0) return Mark::req;
  if (n == 6 && std::strncmp(what, "mapped", 6) == 0) return Mark::mapped;
  return Mark::other;
}

void note_set(TorchStore* t, const char* key) {
  if (t->times == nullptr) return;
  t->times->calls++;
  Mark m = mark_of(key);
  double now = now_us();
  if (m == Mark::req && t->times->first_req_set == 0) t->times->first_req_set = now;
  if (m == Mark::mapped && t->times->mapped_set == 0) t->times->mapped_set = now;
}

void note_get(TorchStore* t, const char* key, bool found, double started) {
  if (t->times == nullptr) return;
  t->times->calls++;
  double now = now_us();
  t->times->wait_us += now - started;
  if (!found) return;
  Mark m = mark_of(key);
  if (m == Mark::req) t->times->last_req_got = now;
  if (m == Mark::mapped) t->times->last_mapped_got = now;
}

int store_failed(const char* op, const char* key, const std::exception& e) {
  return mori__error(MORI_EIO, "c10d::Store::%s(%s) failed: %s", op, key, e.what());
}

int store_set(mori_store* s, const char* key, const void* value, size_t len) {
  try {
    auto p = static_cast<const uint8_t*>(value);
    of(s)->store->set(key, std::vector<uint8_t>(p, p + len));
    note_set(of(s), key);
    return 0;
  } catch (const std::exception& e) {
    return store_failed("set", key, e);
  }
}

// check() until the key is there or timeout_ms passed, sleeping 50 us at
// first and doubling up to 1 ms: most keys are nearly there.
bool poll_key(c10d::Store& store, const std::vector<std::string>& keys, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    if (store.check(keys)) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    if (pause < std::chrono::milliseconds(1)) pause *= 2;
  }
}

// True once the key exists; false if timeout_ms passes first.  A zero
// timeout is one check() (wait(0) would mean "no timeout").  Otherwise the
// store's own wait(), which a TCPStore answers the moment the key is set;
// its timeout is an exception, but a network error is not a timeout and
// propagates.
bool await_key(TorchStore* t, const std::vector<std::string>& keys, int timeout_ms) {
  c10d::Store& store = *t->store;
  if (timeout_ms <= 0) return store.check(keys);
  if (t->poll) return poll_key(store, keys, timeout_ms);
  try {
    store.wait(keys, std::chrono::milliseconds(timeout_ms));
    return true;
  } catch (const c10::DistNetworkError&) {
    throw;
  } catch (const c10::Error&) {
    return store.check(keys);
  }
}

int store_get(mori_store* s, const char* key, void** value, size_t* len, int timeout_ms) {
  double started = now_us();
  try {
    bool found = await_key(of(s), {key}, timeout_ms);
    note_get(of(s), key, found, started);
    if (!found)
      return mori__error(MORI_ETIMEDOUT, "c10d::Store: %s not set within %d ms", key,
                         timeout_ms);
    std::vector<uint8_t> v = of(s)->store->get(key);
    if (v.size() > MORI_STORE_VALUE_MAX)  // no rendezvous entry is larger (store.h)
      return mori__error(MORI_EPROTO, "c10d::Store::get(%s): %zu bytes, more than any entry (%d)",
                         key, v.size(), MORI_STORE_VALUE_MAX);
    void* copy = std::malloc(v.empty() ? 1 : v.size());
    if (copy == nullptr) return mori__error(MORI_ENOMEM, "c10d::Store::get(%s): no memory", key);
    if (!v.empty()) std::memcpy(copy, v.data(), v.size());
    *value = copy;
    *len = v.size();
    return 0;
  } catch (const std::exception& e) {
    return store_failed("get", key, e);
  }
}

int store_add(mori_store* s, const char* key, int64_t delta, int64_t* result) {
  try {
    int64_t v = of(s)->store->add(key, delta);
    if (result) *result = v;
    return 0;
  } catch (const std::exception& e) {
    return store_failed("add", key, e);
  }
}

void store_destroy(mori_store* s) { delete of(s); }

}  // namespace

mori_store* wrap_store(c10::intrusive_ptr<c10d::Store> store, StoreTimes* times) {
  auto* t = new TorchStore();
  t->set = store_set;
  t->get = store_get;
  t->add = store_add;
  t->destroy = store_destroy;
  t->poll = is_file_store(store);
  t->times = times;
  t->store = std::move(store);
  return t;
}

}  // namespace mori_torch
