// module.cpp - mori_symm._C, the extension mori_symm loads.  Loading it
// registers "MORI" (allocator.cpp); these functions are the package's
// helpers: shim choice, teardown, counters, a handle's window facts and the
// phases of the last rendezvous.
#include <torch/csrc/utils/pybind.h>

#include "mori_torch.hpp"

#include <cstdlib>
#include <sstream>

namespace py = pybind11;

namespace mori_torch {
namespace {

py::dict stats() {
  mori_symm_stats core;
  mori_symm_stats_get(&core);
  mori_shim_registry_counts ledger;  // the keys keep their first names
  mori_shim_registry(&ledger);
  py::dict d;
  d["blocks"] = core.blocks;
  d["windows"] = core.windows;
  d["rendezvous"] = core.rendezvous;
  d["core_cache_hits"] = core.cache_hits;
  d["deferred"] = core.deferred;
  d["cache_hits"] = allocator().adapter_cache_hits();
  d["ledger_handles"] = ledger.handles;
  d["ledger_reservations"] = ledger.reservations;
  d["ledger_mappings"] = ledger.mappings;
  d["ledger_exported_fds"] = ledger.exported_fds;
  d["ledger_device_allocs"] = ledger.device_allocs;
  d["ledger_total"] = mori_shim_registry_total();
  d["warm"] = mori_symm_warm();  // in ledger_total: kept for the next rendezvous
  return d;
}

py::dict window_info(const c10::intrusive_ptr<symm::SymmetricMemory>& handle) {
  auto* mori = dynamic_cast<MoriSymmetricMemory*>(handle.get());
  TORCH_CHECK_TYPE(mori != nullptr, "window_info: not a handle of the MORI backend");
  py::dict d;
  d["group"] = mori->group();
  d["offset"] = mori->get_offset();
  d["live"] = mori->live();
  if (!mori->live()) return d;
  mori_window* w = mori->window("window_info");
  size_t stride = 0;
  void* span = mori_window_span(w, &stride);
  d["rank"] = mori_window_rank(w);
  d["world_size"] = mori_window_world_size(w);
  d["device"] = mori_window_device(w);
  d["buffer_size"] = mori_window_buffer_size(w);
  d["signal_pad_size"] = mori_window_signal_pad_size(w);
  d["max_channels"] = mori_window_max_channels(w);
  d["handle_type"] = handle_type_name(mori_window_handle_type(w));
  d["world_within_direct_access"] = mori_window_world_within_direct_access(w) != 0;
  d["span"] = reinterpret_cast<uintptr_t>(span);
  d["stride"] = stride;
  return d;
}

py::dict last_rendezvous() {
  RendezvousTrace t = allocator().last_rendezvous();
  py::dict d;
  d["group"] = t.group;
  d["rank"] = t.rank;
  d["world_size"] = t.world_size;
  d["total_us"] = t.total_us;
  d["resolve_us"] = t.resolve_us;
  d["core_us"] = t.core_us;
  d["publish_us"] = t.publish_us;
  d["requests_us"] = t.requests_us;
  d["map_us"] = t.map_us;
  d["mapped_barrier_us"] = t.mapped_barrier_us;
  d["tail_us"] = t.tail_us;
  d["store_wait_us"] = t.store_wait_us;
  d["store_calls"] = t.store_calls;
  return d;
}

// This thread's Python thread state if it holds the GIL, else null; never
// fatal (PyThreadState_Get is, without the GIL).
PyThreadState* current_thread_state() {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked();
#else
  return _PyThreadState_UncheckedGet();
#endif
}

// A diagnostic for tests/gpu/torch_suite.sh: n inserted into a std::ostream
// inside this extension, the one thing the adapter's messages avoid
// (docs/torch.md, "Messages").  Where that hazard is present it crashes.
std::string stream_probe(long n) {
  std::ostringstream out;
  out << n;
  return out.str();
}

py::tuple probe(int device) {
  int handle_type = 0;
  char why[256] = "";
  TORCH_CHECK(mori_symm_probe(device, &handle_type, why, sizeof why) == 0, mori_last_error());
  return py::make_tuple(handle_type_name(handle_type), std::string(why));
}

}  // namespace
}  // namespace mori_torch

PYBIND11_MODULE(_C, m) {
  using namespace mori_torch;
  // A new rendezvous lets the GIL go while it waits for its peers (torch's
  // binding calls it holding the GIL); only a thread that holds it does.
  set_wait_hooks(WaitHooks{
      // The current thread state is non-null exactly while this thread
      // holds the GIL (PyGILState_Check answers 1 regardless once
      // sub-interpreters exist); torch's ops call in without it.
      []() -> void* { return current_thread_state() != nullptr ? PyEval_SaveThread() : nullptr; },
      [](void* saved) {
        if (saved != nullptr) PyEval_RestoreThread(static_cast<PyThreadState*>(saved));
      }});
  m.doc() = "mori-symm's torch adapter; loading it registers the MORI backend";
  // torch's backends keep what they make (its caching allocator): so does
  // this one, a device-table chunk and one small exported fd per device
  // (mori_symm_set_keep_warm), unless MORI_SYMM_KEEP_WARM says otherwise.
  const char* warm = std::getenv("MORI_SYMM_KEEP_WARM");
  if (warm == nullptr || *warm == '\0') mori_symm_set_keep_warm(1);
  m.def("_prefer_shim", [](const std::string& name) { allocator().prefer_shim(name); },
        py::arg("name"));
  m.def("shim_backend", [] { return allocator().shim_backend(); });
  m.def("release_all", [] { allocator().release_all(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("stats", &stats);
  m.def("window_info", &window_info, py::arg("handle"));
  m.def("last_rendezvous", &last_rendezvous);
  m.def("probe", &probe, py::arg("device"));
  m.def("_stream_probe", &stream_probe, py::arg("n"));
  m.def("teardown_enabled", [] { return mori_symm_teardown_enabled() != 0; });
  m.def("heal", [](const std::string& group, int dead_rank, int wait_ms) {
          return allocator().heal(group, dead_rank, wait_ms);
        },
        py::arg("group"), py::arg("dead_rank"), py::arg("wait_ms"));
  m.def("set_replacement", [](bool on) { mori_symm_set_replacement(on ? 1 : 0); },
        py::arg("on"));
}
