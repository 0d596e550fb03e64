// store.cpp - where a rendezvous meets its peers: a group name resolved to
// (rank, world size, store), and that c10d::Store seen as a mori_store.
// Store failures become MORI_E* codes with a message; nothing throws
// through the C core.
#include "mori_torch.hpp"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>

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
};

c10d::Store& of(mori_store* s) { return *static_cast<TorchStore*>(s)->store; }

int store_failed(const char* op, const char* key, const std::exception& e) {
  return mori__error(MORI_EIO, "c10d::Store::%s(%s) failed: %s", op, key, e.what());
}

int store_set(mori_store* s, const char* key, const void* value, size_t len) {
  try {
    auto p = static_cast<const uint8_t*>(value);
    of(s).set(key, std::vector<uint8_t>(p, p + len));
    return 0;
  } catch (const std::exception& e) {
    return store_failed("set", key, e);
  }
}

// True once key exists; false if timeout_ms passes first.  A first check()
// keeps the short polls of the core's gather free of exceptions; a store
// network error is not a timeout and propagates.
bool await_key(c10d::Store& store, const std::vector<std::string>& keys, int timeout_ms) {
  if (store.check(keys)) return true;
  if (timeout_ms <= 0) return false;  // wait(0) would mean "no timeout"
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
  try {
    if (!await_key(of(s), {key}, timeout_ms))
      return mori__error(MORI_ETIMEDOUT, "c10d::Store: %s not set within %d ms", key,
                         timeout_ms);
    std::vector<uint8_t> v = of(s).get(key);
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
    int64_t v = of(s).add(key, delta);
    if (result) *result = v;
    return 0;
  } catch (const std::exception& e) {
    return store_failed("add", key, e);
  }
}

void store_destroy(mori_store* s) { delete static_cast<TorchStore*>(s); }

}  // namespace

mori_store* wrap_store(c10::intrusive_ptr<c10d::Store> store) {
  auto* t = new TorchStore();
  t->set = store_set;
  t->get = store_get;
  t->add = store_add;
  t->destroy = store_destroy;
  t->store = std::move(store);
  return t;
}

}  // namespace mori_torch
