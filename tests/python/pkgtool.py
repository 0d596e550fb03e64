#!/usr/bin/env python3
"""pkgtool.py - mori-symm's Python package beside another `mori`.

AMD's mori installs a regular package `mori` (mori/__init__.py, libraries,
subpackages and, in recent versions, a mori/allocator/ package of its own).
Ours must live beside it: `mori` is a PEP 420 namespace for us (we install
mori/allocator.py and nothing else there), everything else is under our own
top-level `mori_symm`.  This tool checks that, as a user meets it:

  pkgtool.py wheel STAGE OUTDIR [--source DIR]
      zip a `cmake --install BUILD --component python` tree into a wheel
      (CI has no scikit-build-core: the files are the install rules', the
      metadata is made here, with pyproject.toml's license and LICENSE)
  pkgtool.py check-wheel WHEEL [--extension] [--version V]
      the wheel's file list: exactly mori/allocator.py, mori_symm's modules
      and libraries (each under its SONAME, finding the others through
      $ORIGIN: readelf -d), the extension with --extension, a version that
      agrees inside and out, the MIT license in METADATA and a LICENSE
  pkgtool.py cycle --wheel WHEEL --work DIR [--python PY] [--standin-torch]
                   [--inherit SITE]
      a fresh venv; a stand-in "other mori" that owns mori/__init__.py and
      ours installed in both orders, each uninstalled in turn, and imports
      checked after every step; then a stand-in of AMD's recent mori, whose
      mori/allocator/ package shadows our module and whose extension
      registers "MORI" first.  --standin-torch imports against a stand-in
      torch and extension (CI); --inherit makes SITE's packages (the real
      torch) visible in the venv, leaving out any mori of its own (the GPU
      host).  Prints every command and what it said.
  pkgtool.py conflict --stage STAGE --work DIR [--python PY]
      no venv: the laid-out package (STAGE) beside a stand-in of AMD's
      mori whose mori/allocator/ package is imported before its extension
      (which it loads on first use): that package alone must make
      `import mori_symm` warn; our own mori.allocator module must not.

Nothing is downloaded: pip runs with --no-index on local wheels only.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = "mori-symm"


# ---- wheels, made without a build backend ----

def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(outdir: str, dist: str, version: str, files: dict[str, bytes],
               summary: str, license_text: bytes | None = None,
               license_name: str | None = None) -> str:
    """A wheel of `files` (archive name -> bytes) with METADATA, WHEEL, RECORD
    (and the license, as scikit-build-core puts it)."""
    norm = dist.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    meta = {
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
                             f"Summary: {summary}\n"
                             + (f"License: {license_name}\n" if license_name else "")).encode(),
        f"{info}/WHEEL": (b"Wheel-Version: 1.0\nGenerator: mori-symm tests/python/pkgtool.py\n"
                          b"Root-Is-Purelib: false\nTag: py3-none-any\n"),
    }
    if license_text is not None:
        meta[f"{info}/licenses/LICENSE"] = license_text
    everything = dict(sorted(files.items()))
    everything.update(meta)
    record = [_record_line(n, d) for n, d in everything.items()] + [f"{info}/RECORD,,"]
    path = os.path.join(outdir, f"{norm}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in everything.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def tree_files(root: str) -> dict[str, bytes]:
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.islink(p):
                raise SystemExit(f"pkgtool: {p} is a symlink: a wheel keeps no symlinks, so the "
                                 f"install rules must lay out each library under its SONAME")
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root).replace(os.sep, "/")] = fh.read()
    return out


def version_of(files: dict[str, bytes]) -> str:
    text = files.get("mori_symm/_version.py", b"").decode()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not m:
        raise SystemExit("pkgtool: no __version__ in mori_symm/_version.py")
    return m.group(1)


def pyproject_license(source: str) -> str | None:
    """[project] license of pyproject.toml ({text = ...}), which
    scikit-build-core writes into METADATA as License:."""
    m = re.search(r'^license\s*=\s*\{\s*text\s*=\s*"([^"]+)"', open(
        os.path.join(source, "pyproject.toml"), encoding="utf-8").read(), re.M)
    return m.group(1) if m else None


def cmd_wheel(args) -> int:
    files = tree_files(args.stage)
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.source, "LICENSE"), "rb") as f:
        text = f.read()
    print(make_wheel(args.outdir, OURS, version_of(files), files,
                     "MORI, a torch SymmetricMemory backend (pure-Python part and libraries)",
                     text, pyproject_license(args.source)))
    return 0


# ---- the wheel's file list ----

# Everything our wheel may hold outside its .dist-info, by pattern; each
# pattern must match exactly once (the extension only with --extension).
# The libraries are there once each, under their SONAME: a wheel keeps no
# symlinks, and the loader looks for the SONAME.
def expected(major: str, extension: bool) -> list:
    rows = [
        ("mori/allocator.py", r"mori/allocator\.py"),
        ("mori_symm/__init__.py", r"mori_symm/__init__\.py"),
        ("mori_symm/_version.py", r"mori_symm/_version\.py"),
        (f"libmori_core.so.{major}", rf"mori_symm/libmori_core\.so\.{major}"),
        (f"libmori_hip_shim.so.{major}", rf"mori_symm/libmori_hip_shim\.so\.{major}"),
    ]
    if extension:
        rows.append(("the extension", r"mori_symm/_C\.[A-Za-z0-9_.-]*\.so"))
    return rows


def check_names(names: list[str], major: str, extension: bool) -> list[str]:
    problems = []
    expected_rows = expected(major, extension)
    content = [n for n in names if not re.match(r"[^/]+\.dist-info/", n)]
    for what, pattern in expected_rows:
        hits = [n for n in content if re.fullmatch(pattern, n)]
        if len(hits) != 1:
            problems.append(f"{what}: {len(hits)} file(s) ({', '.join(hits) or 'none'}), "
                            f"expected exactly 1")
    for n in content:
        if not any(re.fullmatch(p, n) for _, p in expected_rows):
            problems.append(f"{n}: not a file of the package"
                            + (" (mori/__init__.py is the other mori's: ours is a namespace "
                               "portion)" if n == "mori/__init__.py" else ""))
    return problems


def elf_dynamic(path: str) -> dict:
    """SONAME, NEEDED and RUNPATH of a shared object (readelf -d)."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    d = {"SONAME": [], "NEEDED": [], "RUNPATH": [], "RPATH": []}
    for key, value in re.findall(r"\((SONAME|NEEDED|RUNPATH|RPATH)\)\s+.*?\[(.*)\]", out):
        d[key].append(value)
    return d


def check_libraries(z: zipfile.ZipFile, names: list[str], work: str) -> list[str]:
    """Each shared object of the package: named as its SONAME, finding what
    it needs of ours beside it ($ORIGIN)."""
    problems = []
    if shutil.which("readelf") is None:
        return ["readelf is missing (binutils): the libraries' SONAMEs cannot be checked"]
    sos = [n for n in names if re.search(r"\.so(\.[0-9]+)*$", n)]
    shipped = {os.path.basename(n) for n in sos}
    for n in sos:
        path = os.path.join(work, os.path.basename(n))
        with open(path, "wb") as f:
            f.write(z.read(n))
        d = elf_dynamic(path)
        base = os.path.basename(n)
        ours = [x for x in d["NEEDED"] if x.startswith("libmori_")]
        print(f"  {base}: SONAME {' '.join(d['SONAME']) or '-'}, needs {' '.join(ours) or 'none of ours'}, "
              f"RUNPATH {' '.join(d['RUNPATH'] + d['RPATH']) or '-'}")
        if base.startswith("lib") and d["SONAME"] != [base]:
            problems.append(f"{base} has SONAME {d['SONAME']}: the loader would look for that name")
        for x in ours:
            if x not in shipped:
                problems.append(f"{base} needs {x}, which the wheel does not hold")
        if ours and "$ORIGIN" not in " ".join(d["RUNPATH"] + d["RPATH"]):
            problems.append(f"{base} needs {' '.join(ours)} but has no $ORIGIN to find them")
    return problems


def cmd_check_wheel(args) -> int:
    with zipfile.ZipFile(args.wheel) as z:
        names = sorted(z.namelist())
        files = {n: z.read(n) for n in names if n.endswith((".py", "METADATA"))}
        print(f"wheel {os.path.basename(args.wheel)}: {len(names)} files")
        for n in names:
            print(f"  {n}")
        inner = version_of(files)
        problems = check_names(names, inner.split(".")[0], args.extension)
        work = tempfile.mkdtemp(prefix="pkgtool-elf-")
        try:
            problems += check_libraries(z, names, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    meta = [n for n in names if n.endswith(".dist-info/METADATA")]
    outer = None
    if len(meta) == 1:
        m = re.search(r"^Version: (.+)$", files[meta[0]].decode(), re.M)
        outer = m.group(1).strip() if m else None
    if outer != inner:
        problems.append(f"METADATA says version {outer}, mori_symm/_version.py {inner}")
    lic = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/(licenses/)?LICEN[CS]E[^/]*", n)]
    meta_text = files[meta[0]].decode() if len(meta) == 1 else ""
    if not re.search(r"^(License: MIT|License-Expression: MIT)$", meta_text, re.M):
        problems.append("METADATA names no MIT license (pyproject's [project] license)")
    if not lic:
        problems.append("no LICENSE file in the wheel's .dist-info")
    if args.version and inner != args.version:
        problems.append(f"mori_symm/_version.py says {inner}, CMake's project says {args.version}")
    for p in problems:
        print(f"check-wheel: {p}")
    if problems:
        print(f"wheel files FAILED: {len(problems)} problem(s)")
        return 1
    print(f"wheel files ok: version {inner}, no mori/__init__.py, each library under its SONAME")
    return 0


# ---- the stand-ins of the other mori ----

def standin_files(with_allocator: bool) -> dict[str, bytes]:
    """AMD's mori as it lays itself out: a regular package with an
    __init__.py, libraries and subpackages; recent versions add a
    mori/allocator/ package and the extension that registers "MORI"."""
    files = {
        "mori/__init__.py": b'"""A stand-in for AMD\'s mori (tests/python/pkgtool.py)."""\n'
                            b'OWNER = "other-mori"\n',
        "mori/libmori_shmem.so": b"not a library: a stand-in\n",
        "mori/shmem/__init__.py": b"",
        "mori/ops/__init__.py": b"",
    }
    if with_allocator:
        files["mori/mori_torch_symm.py"] = (
            b'"""Stands for AMD\'s extension, which registers torch\'s "MORI" backend."""\n'
            b'REGISTERS = "MORI"\n')
        files["mori/allocator/__init__.py"] = (
            b'"""Stands for AMD\'s mori.allocator package: it loads its extension."""\n'
            b"from .. import mori_torch_symm  # noqa: F401\n"
            b'OWNER = "other-mori"\n')
    return files


# ---- the probe, run inside the venv ----

# Prints one JSON line of what a user's imports find.  With a stand-in
# torch (CI) the extension is a stand-in too; the module code under test,
# mori_symm/__init__.py and mori/allocator.py, is the installed one.
PROBE = r'''
import importlib, io, json, os, sys, types, warnings
standin = os.environ.get("PKGTOOL_STANDIN_TORCH")
if standin:
    sys.path.insert(0, standin)
    ext = types.ModuleType("mori_symm._C")
    ext._prefer_shim = lambda name: None
    ext.teardown_enabled = lambda: False
    ext.shim_backend = lambda: "standin"
    sys.modules["mori_symm._C"] = ext
out = {}
def library_version(pkg):
    # libmori_core under its SONAME, as the extension's loader finds it (it
    # finds libmori_hip_shim beside it through $ORIGIN)
    import ctypes, glob
    path = sorted(glob.glob(os.path.join(os.path.dirname(pkg.__file__), "libmori_core.so.*")))
    if not path:
        return "no libmori_core.so.* beside mori_symm"
    lib = ctypes.CDLL(path[0])
    lib.mori_symm_version.restype = ctypes.c_char_p
    return lib.mori_symm_version().decode()
def where(m):
    return getattr(m, "__file__", None)
for step in os.environ["PKGTOOL_PROBE"].split(","):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = importlib.import_module(step)
        out[step] = {"file": where(m), "owner": getattr(m, "OWNER", None),
                     "version": getattr(m, "__version__", None),
                     "library": library_version(m) if step == "mori_symm" else None,
                     "backend": getattr(m, "backend_name", None),
                     "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}
    except Exception as e:
        out[step] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
'''


class Venv:
    def __init__(self, work: str, python: str, standin_torch: bool, inherit: str | None):
        self.dir = os.path.join(work, "venv")
        self.work = work
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            run([python, "-m", "venv", self.dir], quiet=True)
        except Failure:  # a python without ensurepip: a venv without pip
            shutil.rmtree(self.dir, ignore_errors=True)
            run([python, "-m", "venv", "--without-pip", self.dir], quiet=True)
        self.python = os.path.join(self.dir, "bin", "python")
        self.site = subprocess.run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True).stdout.strip()
        has_pip = subprocess.run([self.python, "-m", "pip", "--version"],
                                 capture_output=True).returncode == 0
        # A python without ensurepip: its own pip drives the venv's.
        self.pip = ([self.python, "-m", "pip"] if has_pip
                    else [python, "-m", "pip", "--python", self.python])
        self.env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                        PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
        self.env.pop("PYTHONPATH", None)
        if standin_torch:
            self.env["PKGTOOL_STANDIN_TORCH"] = os.path.join(HERE, "standin_torch")
        if inherit:
            self.inherit(inherit)

    def inherit(self, site: str) -> None:
        """SITE's packages (the real torch) without any mori or mori_symm of
        its own: a directory of links to the rest, added as a site dir."""
        shadow = os.path.join(self.work, "inherited-site")
        shutil.rmtree(shadow, ignore_errors=True)
        os.makedirs(shadow)
        left_out = []
        for name in sorted(os.listdir(site)):
            if re.match(r"(mori|mori_symm|mori[-_]symm)([.-].*)?$", name, re.I):
                left_out.append(name)
                continue
            os.symlink(os.path.join(site, name), os.path.join(shadow, name))
        with open(os.path.join(self.site, "zz_inherited.pth"), "w") as f:
            f.write(f"import site; site.addsitedir({shadow!r})\n")
        print(f"# the venv sees {site} (torch) through {shadow}"
              + (f", without {', '.join(left_out)}" if left_out else ""))

    def pip_do(self, *args: str) -> None:
        shown = "pip " + " ".join(os.path.basename(a) if a.endswith(".whl") else a for a in args)
        print(f"$ {shown}")
        r = subprocess.run(self.pip + list(args), env=self.env, capture_output=True, text=True)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines()
                 if re.match(r"\s*(Successfully|Found existing|Uninstalling|ERROR|WARNING)", ln)]
        for ln in lines:
            print(f"  {ln.strip()}")
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            raise Failure(f"{shown} exited {r.returncode}")

    def probe(self, *modules: str) -> dict:
        env = dict(self.env, PKGTOOL_PROBE=",".join(modules))
        r = subprocess.run([self.python, "-c", PROBE], env=env, capture_output=True, text=True,
                           cwd=self.work)
        if r.returncode != 0:
            raise Failure(f"the probe failed:\n{r.stdout}{r.stderr}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def exists(self, rel: str) -> bool:
        return os.path.lexists(os.path.join(self.site, rel))


class Failure(Exception):
    pass


def run(cmd: list[str], quiet: bool = False) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")


class Cycle:
    def __init__(self, venv: Venv, ours: str, version: str, other: str, other_sum: str):
        self.v, self.ours, self.version = venv, ours, version
        self.other, self.other_sum = other, other_sum
        self.checks = 0

    def check(self, ok: bool, what: str) -> None:
        self.checks += 1
        if not ok:
            raise Failure(what)

    def show(self, facts: dict, name: str) -> None:
        f = facts[name]
        if "error" in f:
            print(f"  import {name}: {f['error']}")
            return
        where = os.path.relpath(f["file"], self.v.site) if f["file"] else "a namespace (no file)"
        extra = ", ".join(f"{k} {f[k]}" for k in ("owner", "version", "library") if f.get(k))
        print(f"  import {name}: {where}" + (f" ({extra})" if extra else ""))
        for w in f["warnings"]:
            print(textwrap.fill(w, 96, initial_indent="    ", subsequent_indent="      "))

    def expect(self, ours: bool, other: bool) -> None:
        names = ("mori", "mori.allocator", "mori_symm")
        print(f"$ python -c 'import mori, mori.allocator, mori_symm'")
        facts = self.v.probe(*names)
        for n in names:
            self.show(facts, n)
        init_ok = (self.v.exists("mori/__init__.py") and
                   _sha(os.path.join(self.v.site, "mori/__init__.py")) == self.other_sum)
        self.check(init_ok if other else not self.v.exists("mori/__init__.py"),
                   "the other mori's mori/__init__.py is " +
                   ("changed or gone" if other else "still installed after its uninstall"))
        mori = facts["mori"]
        if other:
            self.check(mori.get("owner") == "other-mori", f"import mori is not the other mori: {mori}")
        if ours:
            alloc, symm = facts["mori.allocator"], facts["mori_symm"]
            self.check(alloc.get("version") == self.version and alloc.get("backend") == "MORI"
                       and alloc.get("file") == os.path.join(self.v.site, "mori", "allocator.py"),
                       f"import mori.allocator did not find ours: {alloc}")
            self.check(symm.get("version") == self.version, f"import mori_symm: {symm}")
            self.check(symm.get("library") == self.version,
                       f"libmori_core beside mori_symm says {symm.get('library')}")
            self.check(not alloc["warnings"] and not symm["warnings"],
                       f"a warning without another registrant: {alloc['warnings']}")
        else:
            for n in ("mori.allocator", "mori_symm"):
                self.check("ModuleNotFoundError" in facts[n].get("error", ""),
                           f"import {n} still works after mori-symm's uninstall: {facts[n]}")
            for rel in ("mori_symm", "mori/allocator.py"):
                self.check(not self.v.exists(rel), f"{rel} left behind by the uninstall")
        if not ours and not other:
            self.check(not self.v.exists("mori"), "a mori directory is left behind")
        elif not other:
            self.check(mori.get("file") is None, f"import mori is not a namespace: {mori}")

    def both_orders(self) -> None:
        for first, second in ((self.other, self.ours), (self.ours, self.other)):
            label = lambda w: "mori-symm" if w == self.ours else "the other mori"
            print(f"\n## {label(first)} first, then {label(second)}")
            self.v.pip_do("install", "--no-index", "--no-deps", first)
            self.expect(ours=first == self.ours, other=first == self.other)
            self.v.pip_do("install", "--no-index", "--no-deps", second)
            self.expect(ours=True, other=True)
            # the first goes and comes back; then the second goes, then the first
            installed = {first, second}
            for gone, back in ((first, True), (second, False), (first, False)):
                self.v.pip_do("uninstall", "-y", OURS if gone == self.ours else "mori")
                installed.discard(gone)
                self.expect(ours=self.ours in installed, other=self.other in installed)
                if back:
                    self.v.pip_do("install", "--no-index", "--no-deps", gone)
                    installed.add(gone)

    def shadowed_allocator(self, amd: str) -> None:
        print("\n## beside a mori with its own mori/allocator/ package and extension")
        for w in (self.ours, amd):
            self.v.pip_do("install", "--no-index", "--no-deps", w)
        print("$ python -c 'import mori.allocator, mori_symm'")
        facts = self.v.probe("mori.allocator", "mori_symm")
        for n in ("mori.allocator", "mori_symm"):
            self.show(facts, n)
        alloc, symm = facts["mori.allocator"], facts["mori_symm"]
        self.check(alloc.get("owner") == "other-mori",
                   f"mori.allocator should be the other mori's package (it shadows ours): {alloc}")
        self.check(symm.get("version") == self.version, f"import mori_symm: {symm}")
        self.check(any("BackendConflictWarning" in w and "mori.mori_torch_symm" in w
                       and "MORI_SYMM" in w for w in symm["warnings"]),
                   f"no warning naming the other registrant: {symm['warnings']}")
        print("$ python -c 'import mori_symm'")
        alone = self.v.probe("mori_symm")
        self.show(alone, "mori_symm")
        self.check(not alone["mori_symm"]["warnings"], "a warning without another registrant")
        for dist in ("mori", OURS):
            self.v.pip_do("uninstall", "-y", dist)
        self.check(not self.v.exists("mori"), "a mori directory is left behind")


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def cmd_cycle(args) -> int:
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with zipfile.ZipFile(args.wheel) as z:
        version = version_of({n: z.read(n) for n in z.namelist() if n.endswith("_version.py")})
    plain = standin_files(with_allocator=False)
    other = make_wheel(work, "mori", "0.0.0", plain, "a stand-in for AMD's mori")
    os.makedirs(os.path.join(work, "amd"))
    amd = make_wheel(os.path.join(work, "amd"), "mori", "0.0.0", standin_files(True),
                     "a stand-in for AMD's mori with its own allocator package")
    print(f"# mori-symm {version} ({os.path.basename(args.wheel)}) beside a stand-in of AMD's "
          f"mori that owns mori/__init__.py")
    try:
        venv = Venv(work, args.python, args.standin_torch, args.inherit)
        print(f"# a fresh venv: {venv.python}")
        cycle = Cycle(venv, os.path.abspath(args.wheel), version, other,
                      hashlib.sha256(plain["mori/__init__.py"]).hexdigest())
        cycle.both_orders()
        cycle.shadowed_allocator(amd)
    except Failure as e:
        print(f"coexist FAILED: {e}")
        return 1
    print(f"coexist ok: {cycle.checks} checks, both orders, each uninstalled in turn")
    return 0


def cmd_conflict(args) -> int:
    work = os.path.abspath(args.work)
    stage = os.path.abspath(args.stage)
    shutil.rmtree(work, ignore_errors=True)
    amd = os.path.join(work, "amd")
    files = standin_files(with_allocator=True)
    # AMD's mori.allocator before its first use: the extension that
    # registers "MORI" is loaded (or compiled) later, so importing the
    # package leaves only mori.allocator in sys.modules.
    files["mori/allocator/__init__.py"] = (
        b'"""Stands for AMD\'s mori.allocator before its first use: no extension yet."""\n'
        b'OWNER = "other-mori"\n')
    for rel, data in files.items():
        path = os.path.join(amd, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    env = dict(os.environ, PKGTOOL_STANDIN_TORCH=os.path.join(HERE, "standin_torch"),
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")

    def probe(path: list[str], *modules: str) -> dict:
        print(f"$ PYTHONPATH={os.pathsep.join(path)} python -c 'import {', '.join(modules)}'")
        r = subprocess.run([args.python, "-c", PROBE], capture_output=True, text=True, cwd=work,
                           env=dict(env, PYTHONPATH=os.pathsep.join(path),
                                    PKGTOOL_PROBE=",".join(modules)))
        if r.returncode != 0:
            raise Failure(f"the probe failed:\n{r.stdout}{r.stderr}")
        facts = json.loads(r.stdout.strip().splitlines()[-1])
        for name in modules:
            print(f"  {name}: {facts[name]}")
        return facts

    problems = []
    try:
        facts = probe([amd, stage], "mori.allocator", "mori_symm")
        alloc, symm = facts["mori.allocator"], facts["mori_symm"]
        if alloc.get("owner") != "other-mori":
            problems.append(f"mori.allocator should be the stand-in's package: {alloc}")
        where = os.path.join(amd, "mori", "allocator", "__init__.py")
        if not any("BackendConflictWarning" in w and f"mori.allocator ({where})" in w
                   for w in symm.get("warnings", [])):
            problems.append("no BackendConflictWarning naming AMD's mori.allocator, imported "
                            f"before its extension: {symm.get('warnings')}")
        ours = probe([stage], "mori.allocator")["mori.allocator"]
        if ours.get("file") != os.path.join(stage, "mori", "allocator.py") or ours.get("warnings"):
            problems.append(f"our own mori.allocator, alone: {ours}")
    except Failure as e:
        problems.append(str(e))
    for p in problems:
        print(f"  problem: {p}")
    if problems:
        print(f"conflict FAILED: {len(problems)} problem(s)")
        return 1
    print("conflict ok: AMD's mori.allocator alone warns, ours does not")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheel")
    w.add_argument("stage")
    w.add_argument("outdir")
    w.add_argument("--source", default=os.path.dirname(os.path.dirname(HERE)),
                   help="the source tree (its LICENSE and pyproject.toml's license)")
    c = sub.add_parser("check-wheel")
    c.add_argument("wheel")
    c.add_argument("--extension", action="store_true")
    c.add_argument("--version")
    y = sub.add_parser("cycle")
    y.add_argument("--wheel", required=True)
    y.add_argument("--work", required=True)
    y.add_argument("--python", default=sys.executable)
    y.add_argument("--standin-torch", action="store_true")
    y.add_argument("--inherit")
    k = sub.add_parser("conflict")
    k.add_argument("--stage", required=True)
    k.add_argument("--work", required=True)
    k.add_argument("--python", default=sys.executable)
    args = p.parse_args(argv)
    return {"wheel": cmd_wheel, "check-wheel": cmd_check_wheel, "cycle": cmd_cycle,
            "conflict": cmd_conflict}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
