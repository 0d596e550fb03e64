// store.cpp - where a rendezvous meets its peers: a group name resolved to
// (rank, world size, store), and that c10d::Store seen as a mori_store.
// Store failures become MORI_E* codes with a message; nothing throws
// through the C core.  The wrapper also times the core's store calls, which
// is how the adapter sees the phases of a rendezvous.
#include "mori_torch.hpp"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace mori_torch {

Group resolve_group(const std::string& name) {
  std::string registry_why;
  try {
    auto pg = c10d::resolve_process_group(name);
    TORCH_CHECK(pg->getStore(), message("MORI: process group '%s' has no store", name.c_str()).c_str());
    return Group{pg->getRank(), pg->getSize(), pg->getStore()};
  } catch (const c10::Error& e) {
    registry_why = e.what_without_backtrace();
  }
  try {
    auto& info = symm::get_group_info(name);
    return Group{info.rank, info.world_size, info.store};
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, message("MORI rendezvous: group '%s' is neither a registered process group "
                               "(%s) nor set with set_group_info (%s)",
                               name.c_str(), registry_why.c_str(), e.what_without_backtrace())
                           .c_str());
  }
}

namespace {

// The core sees only the mori_store base.
struct TorchStore : mori_store {
  c10::intrusive_ptr<c10d::Store> store;
  StoreTimes* times;
  // When each key still missing was first asked for: the core asks in
  // short slices (so that it can look for a peer's abort between them), and
  // the polling backs off over the whole wait for a key, not per slice.
  std::map<std::string, std::chrono::steady_clock::time_point> awaited;
};

TorchStore* of(mori_store* s) { return static_cast<TorchStore*>(s); }

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
  return mori_set_error(MORI_EIO, "c10d::Store::%s(%s) failed: %s", op, key, e.what());
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

// True once the key exists; false if timeout_ms passes first (0: one
// check()).  Every store is polled with check(), never waited on with
// wait(): a TCPStore's wait() that times out logs a c10d warning
// ("waitForInput ... timed out") each time, which the core's short slices
// would turn into thousands of lines, and a FileStore's wait() sleeps in
// 10 ms steps.  The pause between checks grows with how long the key has
// been awaited (mori_store_backoff_us: an eighth of it, from 20 us up to
// 2 ms), so a key that comes soon is seen soon and a long wait costs the
// store few requests.
bool await_key(TorchStore* t, const std::string& key, int timeout_ms) {
  using clock = std::chrono::steady_clock;
  c10d::Store& store = *t->store;
  const std::vector<std::string> keys{key};
  if (store.check(keys)) {
    t->awaited.erase(key);
    return true;
  }
  if (timeout_ms <= 0) return false;
  clock::time_point now = clock::now();
  clock::time_point deadline = now + std::chrono::milliseconds(timeout_ms);
  clock::time_point since = t->awaited.emplace(key, now).first->second;
  for (;;) {
    if (now >= deadline) return false;
    double waited_us = std::chrono::duration<double, std::micro>(now - since).count();
    auto pause = std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double, std::micro>(mori_store_backoff_us(waited_us)));
    std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
    if (store.check(keys)) {
      t->awaited.erase(key);
      return true;
    }
    now = clock::now();
  }
}

int store_get(mori_store* s, const char* key, void** value, size_t* len, int timeout_ms) {
  double started = now_us();
  try {
    bool found = await_key(of(s), key, timeout_ms);
    note_get(of(s), key, found, started);
    if (!found)
      return mori_set_error(MORI_ETIMEDOUT, "c10d::Store: %s not set within %d ms", key,
                         timeout_ms);
    std::vector<uint8_t> v = of(s)->store->get(key);
    if (v.size() > MORI_STORE_VALUE_MAX)  // no rendezvous entry is larger (store.h)
      return mori_set_error(MORI_EPROTO, "c10d::Store::get(%s): %zu bytes, more than any entry (%d)",
                         key, v.size(), MORI_STORE_VALUE_MAX);
    void* copy = std::malloc(v.empty() ? 1 : v.size());
    if (copy == nullptr) return mori_set_error(MORI_ENOMEM, "c10d::Store::get(%s): no memory", key);
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
  t->times = times;
  t->store = std::move(store);
  return t;
}

}  // namespace mori_torch
