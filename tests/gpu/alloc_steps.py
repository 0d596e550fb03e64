"""Where an allocation's time goes, on a GPU host (no torch needed).

Times, through libmori_hip_shim.so (MORI_SYMM_SHIM, default cuda), each
runtime call of mori_symm_alloc's path on one 2 MiB granule: create,
reserve, map, grant access, zero (synchronous hipMemset, as before, and
hipMemsetAsync on the default stream, as now), export as a POSIX fd; then
the whole of mori_symm_alloc and mori_symm_alloc_on_stream + free through
libmori_core.so.  Prints the median and minimum per step in microseconds:
whether exporting lazily (at the first rendezvous) would pay is the export
row against the alloc row.

    python3 tests/gpu/alloc_steps.py [LIBDIR] [--iters N]   (LIBDIR: build-gpu/lib)
"""

from __future__ import annotations

import ctypes as C
import os
import statistics
import sys
import time


class Location(C.Structure):
    _fields_ = [("type", C.c_int), ("id", C.c_int)]


class Prop(C.Structure):  # hipMemAllocationProp (ROCm >= 6.2 layout, 32 bytes)
    _fields_ = [("type", C.c_int), ("requestedHandleType", C.c_int), ("location", Location),
                ("win32HandleMetaData", C.c_void_p), ("compressionType", C.c_ubyte),
                ("gpuDirectRDMACapable", C.c_ubyte), ("usage", C.c_ushort),
                ("reserved", C.c_ubyte * 4)]


class Access(C.Structure):  # hipMemAccessDesc
    _fields_ = [("location", Location), ("flags", C.c_int)]


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    libdir = args[0] if args else "build-gpu/lib"
    iters = 200
    if "--iters" in sys.argv:
        iters = int(sys.argv[sys.argv.index("--iters") + 1])
    os.environ.setdefault("MORI_SYMM_SHIM", "cuda")
    shim = C.CDLL(os.path.join(libdir, "libmori_hip_shim.so"), mode=C.RTLD_GLOBAL)
    core = C.CDLL(os.path.join(libdir, "libmori_core.so"))
    shim.mori_shim_message.restype = C.c_char_p

    def ok(rc: int, what: str) -> None:
        if rc != 0:
            raise SystemExit(f"alloc_steps: {what} failed: {rc}: "
                             f"{shim.mori_shim_message().decode()}")

    ok(shim.mori_hipSetDevice(0), "hipSetDevice")
    prop = Prop(type=1, requestedHandleType=1, location=Location(1, 0))  # pinned, posix fd, dev 0
    gran = C.c_size_t(0)
    ok(shim.mori_hipMemGetAllocationGranularity(C.byref(gran), C.byref(prop), 1), "granularity")
    size = gran.value
    access = Access(Location(1, 0), 3)
    times: dict[str, list[float]] = {}

    def timed(name: str, fn) -> None:
        t0 = time.perf_counter()
        fn()
        times.setdefault(name, []).append((time.perf_counter() - t0) * 1e6)

    for i in range(iters + 10):  # the first 10 warm up and are dropped
        h, va, fd = C.c_void_p(), C.c_void_p(), C.c_int(-1)
        timed("create", lambda: ok(shim.mori_hipMemCreate(C.byref(h), C.c_size_t(size),
                                                          C.byref(prop), C.c_ulonglong(0)),
                                   "create"))
        timed("reserve", lambda: ok(shim.mori_hipMemAddressReserve(
            C.byref(va), C.c_size_t(size), C.c_size_t(size), None, C.c_ulonglong(0)), "reserve"))
        timed("map", lambda: ok(shim.mori_hipMemMap(va, C.c_size_t(size), C.c_size_t(0), h,
                                                    C.c_ulonglong(0)), "map"))
        timed("grant access", lambda: ok(shim.mori_hipMemSetAccess(
            va, C.c_size_t(size), C.byref(access), C.c_size_t(1)), "access"))
        timed("zero: hipMemset (sync)", lambda: ok(shim.mori_hipMemset(va, 0, C.c_size_t(size)),
                                                    "memset"))
        timed("zero: hipMemsetAsync (enqueue)", lambda: ok(shim.mori_hipMemsetAsync(
            va, 0, C.c_size_t(size), None), "memsetAsync"))
        ok(shim.mori_hipStreamSynchronize(None), "sync")
        timed("export fd", lambda: ok(shim.mori_hipMemExportToShareableHandle(
            C.byref(fd), h, 1, C.c_ulonglong(0)), "export"))
        timed("close exported fd (handle held)", lambda: ok(shim.mori_close(fd), "close"))
        ok(shim.mori_hipMemExportToShareableHandle(C.byref(fd), h, 1, C.c_ulonglong(0)), "export")
        timed("unmap + free + release", lambda: (
            ok(shim.mori_hipMemUnmap(va, C.c_size_t(size)), "unmap"),
            ok(shim.mori_hipMemAddressFree(va, C.c_size_t(size)), "address free"),
            ok(shim.mori_hipMemRelease(h), "release")))
        # the teardown's order: the exported fd is closed after the final release
        timed("close exported fd (after the release)", lambda: ok(shim.mori_close(fd), "close"))
        d = C.c_void_p()
        timed("hipMalloc (256 bytes)", lambda: ok(shim.mori_hipMalloc(C.byref(d), C.c_size_t(256)),
                                                   "hipMalloc"))
        timed("hipFree (256 bytes)", lambda: ok(shim.mori_hipFree(d), "hipFree"))
        tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"alloc_steps.{os.getpid()}")
        timed("mkdir + rmdir (TMPDIR)", lambda: (os.mkdir(tmp), os.rmdir(tmp)))
        p = C.c_void_p()
        timed("mori_symm_alloc (1 MiB)",
              lambda: ok(core.mori_symm_alloc(C.c_size_t(1 << 20), 0, C.byref(p)), "alloc"))
        timed("mori_symm_free", lambda: ok(core.mori_symm_free(p), "free"))
        timed("mori_symm_alloc_on_stream (1 MiB)",
              lambda: ok(core.mori_symm_alloc_on_stream(C.c_size_t(1 << 20), 0, None,
                                                        C.byref(p)), "alloc_on_stream"))
        ok(shim.mori_hipStreamSynchronize(None), "sync")
        ok(core.mori_symm_free(p), "free")
        if i == 9:
            times.clear()

    print(f"alloc_steps: shim {os.environ['MORI_SYMM_SHIM']}, granule {size} bytes, "
          f"{iters} iterations")
    print(f"{'step':36s} {'median us':>10s} {'min us':>10s}")
    for name, v in times.items():
        print(f"{name:36s} {statistics.median(v):10.1f} {min(v):10.1f}")
    print(f"alloc_steps ok: leaks={shim.mori_shim_registry_total()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
