#!/usr/bin/env python3
"""agree.py - mori-symm's version is written once, in CMakeLists.txt's
project(VERSION); everything that reports it must say the same:

    agree.py --cmake V --source DIR --symm EXE --fi EXE --probe EXE
             --python-version FILE --pc FILE --cmake-package FILE

pyproject.toml's regex (scikit-build-core's dynamic version) applied to
CMakeLists.txt, `mori-symm --version`, `mori-fi --version`, the header's
macros and mori_symm_version() (the probe), mori_symm/_version.py, the
pkg-config file and the CMake package's version file.  Prints a table;
exits 1 naming every place that differs.
"""
import argparse
import re
import subprocess
import sys


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return (r.stdout + r.stderr).strip() if r.returncode == 0 else \
        f"exit {r.returncode}: {(r.stdout + r.stderr).strip()}"


def pyproject_regex(path):
    text = open(path, encoding="utf-8").read()
    try:
        import tomllib
        return tomllib.loads(text)["tool"]["scikit-build"]["metadata"]["version"]["regex"]
    except ImportError:  # Python < 3.11: the one literal string of that table
        m = re.search(r"\[tool\.scikit-build\.metadata\.version\][^\[]*?regex\s*=\s*'([^']*)'",
                      text, re.S)
        return m.group(1) if m else None


def grab(pattern, text):
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else f"(not found in: {text[:120]!r})"


def main():
    p = argparse.ArgumentParser()
    for opt in ("cmake", "source", "symm", "fi", "probe", "python-version", "pc",
                "cmake-package"):
        p.add_argument(f"--{opt}", required=True)
    a = p.parse_args()
    regex = pyproject_regex(f"{a.source}/pyproject.toml")
    cmakelists = open(f"{a.source}/CMakeLists.txt", encoding="utf-8").read()
    m = re.search(regex, cmakelists, re.M) if regex else None
    probe = run([a.probe])
    seen = [
        ("pyproject.toml's regex over CMakeLists.txt", m.group("value") if m else "(no match)"),
        ("mori-symm --version", grab(r"^mori-symm (\S+)$", run([a.symm, "--version"]))),
        ("mori-fi --version", grab(r"^mori-fi (\S+)$", run([a.fi, "--version"]))),
        ("MORI_SYMM_VERSION_MAJOR/MINOR/PATCH", grab(r"^macros (\S+)$", probe)),
        ("the header's version string", grab(r"^string (\S+)$", probe)),
        ("mori_symm_version()", grab(r"^library (\S+)$", probe)),
        ("mori_symm.__version__ (_version.py)",
         grab(r'^__version__ = "([^"]+)"', open(a.python_version).read())),
        ("mori-symm.pc Version", grab(r"^Version: (\S+)$", open(a.pc).read())),
        ("find_package(mori_symm) version",
         grab(r'set\(PACKAGE_VERSION "([^"]+)"\)', open(a.cmake_package).read())),
    ]
    bad = 0
    print(f"{'project(VERSION) in CMakeLists.txt':45} {a.cmake}")
    for where, v in seen:
        mark = "" if v == a.cmake else "   <- DIFFERS"
        bad += v != a.cmake
        print(f"{where:45} {v}{mark}")
    if bad:
        print(f"versions FAILED: {bad} of {len(seen)} places differ from {a.cmake}")
        return 1
    print(f"versions agree: {a.cmake} in {len(seen) + 1} places")
    return 0


if __name__ == "__main__":
    sys.exit(main())
