// module.cpp - mori._C, the extension mori.allocator loads.  Loading it
// registers "MORI" (allocator.cpp); these functions are the package's
// helpers: shim choice, teardown, counters and a handle's window facts.
#include <torch/csrc/utils/pybind.h>

#include "mori_torch.hpp"

namespace py = pybind11;

namespace mori_torch {
namespace {

py::dict stats() {
  mori_symm_stats core;
  mori_symm_stats_get(&core);
  mori_shim_ledger_counts ledger;
  mori_shim_ledger(&ledger);
  py::dict d;
  d["blocks"] = core.blocks;
  d["windows"] = core.windows;
  d["rendezvous"] = core.rendezvous;
  d["core_cache_hits"] = core.cache_hits;
  d["cache_hits"] = allocator().adapter_cache_hits();
  d["ledger_handles"] = ledger.handles;
  d["ledger_reservations"] = ledger.reservations;
  d["ledger_mappings"] = ledger.mappings;
  d["ledger_exported_fds"] = ledger.exported_fds;
  d["ledger_device_allocs"] = ledger.device_allocs;
  d["ledger_total"] = mori_shim_ledger_total();
  return d;
}

py::dict window_info(const c10::intrusive_ptr<symm::SymmetricMemory>& handle) {
  auto* mori = dynamic_cast<MoriSymmetricMemory*>(handle.get());
  TORCH_CHECK_TYPE(mori != nullptr, "window_info: not a handle of the MORI backend");
  const Window& w = mori->window();
  py::dict d;
  d["group"] = w.group;
  d["rank"] = w.rank;
  d["world_size"] = w.world_size;
  d["device"] = w.device;
  d["offset"] = mori->get_offset();
  d["buffer_size"] = w.buffer_size;
  d["signal_pad_size"] = w.signal_pad_size;
  d["handle_type"] = handle_type_name(w.handle_type);
  d["world_within_direct_access"] = mori->world_within_direct_access();
  d["span"] = reinterpret_cast<uintptr_t>(w.span);
  d["stride"] = w.stride;
  d["live"] = w.live != nullptr;
  return d;
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
  m.doc() = "mori-symm's torch adapter; loading it registers the MORI backend";
  m.def("_prefer_shim", [](const std::string& name) { allocator().prefer_shim(name); },
        py::arg("name"));
  m.def("shim_backend", [] { return allocator().shim_backend(); });
  m.def("release_all", [] { allocator().release_all(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("stats", &stats);
  m.def("window_info", &window_info, py::arg("handle"));
  m.def("probe", &probe, py::arg("device"));
  m.def("teardown_enabled", [] { return mori_symm_teardown_enabled() != 0; });
}
