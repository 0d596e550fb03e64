#!/usr/bin/env python3
"""check_env.py - every environment variable the code reads is a row of the
one table (tools/env/env_table.c), and every row is read somewhere.

    check_env.py SOURCE_DIR NAMES_FILE     (NAMES_FILE: `mori-env-doc --names`)
    check_env.py SOURCE_DIR --scan         print what the scan finds, by name

The scan covers the code folders (C, C++, CUDA, Python and shell files):
a MORI_* or TORCH_* name is an environment variable where the code names
it as one: a string literal that is exactly the name (getenv("X"), a
table of names, os.environ["X"], os.environ.get("X")) or the name and a
value ("X=1" for a child's environment), in Python also a keyword of an
environment dict (dict(os.environ, X="1")), and in shell a read ($X,
${X...}) or an assignment (X=1, export X=1), never a CMake -DX=.  Names that are
not environment variables are listed below with why.
"""
import os
import re
import sys

CODE_DIRS = ["core", "hip_shim", "fsm", "faultinject", "tools", "torch", "tests", "fuzz",
             "scripts", "bench", "examples", ".ci"]
C_EXT = (".c", ".h", ".cpp", ".hpp", ".cu", ".cc")
NAME = r"(?:MORI|TORCH)_[A-Z0-9_]*[A-Z0-9]"
# string literals of code: "NAME" or "NAME=..."
LITERAL = re.compile(r"""(?<![\w-])["'](""" + NAME + r""")(?:["']|=)""")
SHELL_READ = re.compile(r"\$\{?(" + NAME + r")\b")
SHELL_SET = re.compile(r"(?:^|[\s;(])(?:export\s+)?(" + NAME + r")=")
PY_KWARG = re.compile(r"[(,]\s*(" + NAME + r")\s*=(?!=)")
# Names in those forms that are not environment variables.
NOT_ENV = {
    "MORI_SYMM": "the backend's second registered name (torch/csrc/allocator.cpp)",
    "MORI_FI_UNSET": "a placeholder entry a sweep keeps its child's environment array whole with",
    "MORI_STORE_KEY_MAX": "the longest key every store takes (core/include/mori/store.h), named in a message",
}


def error_names(root):
    """The error codes' names (core/src/base/error.c's table prints them)."""
    path = os.path.join(root, "core/include/mori/error.h")
    if not os.path.exists(path):
        return set()
    text = open(path, encoding="utf-8").read()
    return set(re.findall(r"\b(MORI_(?:OK|E[A-Z]+))\b", text))


def files(root):
    for top in CODE_DIRS:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for d, dirs, names in os.walk(base):
            # tests/env/fixtures holds code the check must reject
            dirs[:] = sorted(x for x in dirs if not x.startswith(("build", "__pycache__"))
                             and os.path.join(d, x) != os.path.join(root, "tests", "env", "fixtures"))
            for n in sorted(names):
                yield os.path.join(d, n)


def kind_of(path):
    if path.endswith(C_EXT):
        return "c"
    if path.endswith(".py"):
        return "py"
    if path.endswith(".sh"):
        return "sh"
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return None
    if first.startswith(b"#!") and (b"sh" in first or b"bash" in first):
        return "sh"
    if first.startswith(b"#!") and b"python" in first:
        return "py"
    return None


def scan(root):
    """{name: [(file, line), ...]} of every variable the code names."""
    skip = error_names(root) | set(NOT_ENV)
    found = {}
    for path in files(root):
        kind = kind_of(path)
        if kind is None:
            continue
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                names = []
                if kind in ("c", "py"):
                    names += LITERAL.findall(line)
                if kind == "py":
                    names += PY_KWARG.findall(line)
                if kind == "sh":
                    names += SHELL_READ.findall(line) + SHELL_SET.findall(line)
                for n in names:
                    if n not in skip:
                        found.setdefault(n, []).append((rel, i))
    return found


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    found = scan(root)
    if argv[2] == "--scan":
        for n in sorted(found):
            print(f"{n:42} {len(found[n]):3}  {found[n][0][0]}:{found[n][0][1]}")
        return 0
    table = set()
    with open(argv[2], encoding="utf-8") as f:
        for line in f:
            if line.strip():
                table.add(line.split()[0])
    bad = 0
    for n in sorted(set(found) - table):
        where = ", ".join(f"{p}:{l}" for p, l in found[n][:3])
        print(f"env: {n} is read at {where} but is not a row of tools/env/env_table.c")
        bad += 1
    for n in sorted(table - set(found)):
        print(f"env: {n} is a row of tools/env/env_table.c that no code reads")
        bad += 1
    if bad:
        print(f"env table FAILED: {bad} difference(s) between the code and the table")
        return 1
    print(f"env table ok: {len(table)} variables, each read by the code and a row of the table")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
