"""mori-symm's torch SymmetricMemory backend, "MORI".

Importing this module loads the extension (``mori_symm._C``), which
registers the backend with torch (``register_availability``) under two
names: "MORI", and "MORI_SYMM", which no other package registers.  It also
binds the GPU shim to the runtime torch was built for and arranges teardown
from an ``atexit`` hook (static destructors run after the GPU runtime has
begun unwinding)::

    import torch.distributed._symmetric_memory as symm_mem
    import mori_symm                  # or: import mori.allocator
    symm_mem.set_backend("MORI")
    t = symm_mem.empty(1024, dtype=torch.bfloat16, device=device)
    hdl = symm_mem.rendezvous(t, group_name)

``mori_symm`` is this package's own top-level module: the extension, the
libraries it loads, the version and the helpers live here.  ``mori`` is
shared with AMD's mori package, so ``mori.allocator`` (a module of ours in
the ``mori`` namespace) re-exports this module; where AMD's mori brings its
own ``mori/allocator/`` package, that one is what ``import mori.allocator``
finds, and ``import mori_symm`` is the name that always means this backend
(docs/torch.md, "Beside AMD's mori").
"""

from __future__ import annotations

import atexit
import os
import sys
import warnings
from typing import Any

from ._version import __version__, version_info

__all__ = [
    "BackendConflictWarning",
    "__version__",
    "backend_name",
    "backend_names",
    "last_rendezvous",
    "release_all",
    "shim_backend",
    "signal_pad_supported",
    "stats",
    "version_info",
    "window_info",
    "world_within_direct_access",
]

backend_name = "MORI"
# Every name this backend registers under; the second is ours alone.
backend_names = ("MORI", "MORI_SYMM")


class BackendConflictWarning(RuntimeWarning):
    """Another package registered torch's "MORI" backend before this one."""


# What another package leaves in sys.modules once it has registered a
# SymmetricMemory backend named "MORI": AMD's mori registers from its
# extension mori.mori_torch_symm (or the one of that name its
# mori.allocator compiles on first use), and its mori.allocator is a
# package where ours is a module.
_OTHER_REGISTRANTS = ("mori.mori_torch_symm", "mori_torch_symm")


def _other_registrant() -> str | None:
    for name in _OTHER_REGISTRANTS:
        module = sys.modules.get(name)
        if module is not None:
            return f"{name} ({getattr(module, '__file__', None) or 'no file'})"
    allocator = sys.modules.get("mori.allocator")
    if allocator is not None and getattr(allocator, "__path__", None) is not None:
        return f"mori.allocator ({getattr(allocator, '__file__', None) or 'no file'})"
    return None


_earlier = _other_registrant()
if _earlier is not None:
    warnings.warn(
        f'torch\'s SymmetricMemory backend "MORI" was registered by another package before '
        f"mori_symm {__version__}: {_earlier}.  torch keeps the last registration of a name, "
        f'so set_backend("MORI") now selects mori-symm\'s backend; set_backend("MORI_SYMM") '
        f"selects it whatever was imported after it.",
        BackendConflictWarning,
    )

import torch  # noqa: E402  (before the extension: it links against libtorch)
import torch.distributed  # noqa: E402,F401  (registers _SymmetricMemory, which window_info takes)

from . import _C  # noqa: E402  (loading it registers the backend)


def _default_shim() -> str:
    # ROCm torch reports torch.version.hip; CUDA torch runs the cuda shim.
    chosen = os.environ.get("MORI_SYMM_SHIM", "")
    if chosen:
        return chosen
    return "hip" if torch.version.hip is not None else "cuda"


_C._prefer_shim(_default_shim())


def signal_pad_supported() -> bool:
    """True: this build reserves torch's signal pad and implements barrier,
    put_signal and wait_signal, which torch's own collectives need."""
    return True


def shim_backend() -> str:
    """The GPU shim backend in use ("cuda", "hip" or "sim"); brings it up."""
    return _C.shim_backend()


def heal(group_name: str, dead_rank: int, wait_ms: int = 10000) -> int:
    """Heal every window of `group_name` on this rank after the death of its
    rank `dead_rank` (docs/recovery.md): a replacement process, started as
    that rank with MORI_SYMM_REPLACEMENT=1 (or set_replacement(True) before
    its first rendezvous), makes the group's rendezvous in the same order as
    the rank it replaces.  The handles, tensors, buffer_ptrs and signal pads
    of this rank stay valid; graphs captured on them replay.  Waits up to
    wait_ms for the dead rank's process to be gone first.  Returns how many
    windows healed; raises with the core's message if one did not."""
    return _C.heal(group_name, dead_rank, wait_ms)


def set_replacement(on: bool = True) -> None:
    """Mark this process as the replacement of a dead rank (before its first
    rendezvous); the same as MORI_SYMM_REPLACEMENT=1."""
    _C.set_replacement(on)


def release_all() -> None:
    """Tear down every window and block now.  Tensors still referring to them
    must not be used afterwards; handles taken before stop being live (their
    accessors raise) and torch's later frees of the blocks are ignored."""
    _C.release_all()


def stats() -> dict[str, int]:
    """Live blocks and windows, rendezvous counts, cache hits (the adapter's
    ``cache_hits`` and the core's ``core_cache_hits``) and the shim's resource
    registry of live runtime resources, under the keys' first names
    (``ledger_total`` is 0 after release_all)."""
    return dict(_C.stats())


def window_info(handle: Any) -> dict[str, Any]:
    """Facts about the window behind a handle from ``symm_mem.rendezvous``:
    group, rank, world_size, device, offset, buffer_size, signal_pad_size,
    max_channels, handle_type ("fabric" or "posix_fd"),
    world_within_direct_access, and the flat span and its stride (peer r's
    slot is ``span + r * stride``; the own rank's slot maps the same memory as
    the tensor, whose own address is ``buffer_ptrs[rank]``).  ``live`` is
    False once ``release_all()`` ran; then only group and offset remain."""
    return dict(_C.window_info(handle))


def last_rendezvous() -> dict[str, Any]:
    """Where this process's last new rendezvous spent its time, in
    microseconds: total, resolve (the group), core, and the core's phases as
    its store calls show them (publish, requests, map, mapped_barrier,
    tail), plus store_wait_us and store_calls.  ``MORI_SYMM_DEBUG=INFO``
    logs the same line at every rendezvous."""
    return dict(_C.last_rendezvous())


def world_within_direct_access(handle: Any) -> bool:
    """SymmetricMemory::world_within_direct_access() of a handle: whether every
    peer is reachable by load/store (computed from the peers' requests)."""
    return bool(_C.window_info(handle)["world_within_direct_access"])


def _release_at_exit() -> None:
    if not _C.teardown_enabled():
        return
    try:
        _C.release_all()
    except RuntimeError as e:  # report, never raise from an exit hook
        print(f"mori_symm: teardown at exit failed: {e}", file=sys.stderr)


atexit.register(_release_at_exit)
