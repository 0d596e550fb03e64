#!/usr/bin/env python3
"""check_layers.py - the folders of mori-symm depend downward only.

Every top-level folder has a layer (LAYERS below, the table
docs/architecture.md draws).  A folder may include a header of, or link a
target defined in, its own folder or a folder of a LOWER layer; anything
else is reported with the file and line that makes the edge.  Includes are
resolved against the repository's own files (a system header is nobody's
edge); link edges come from each CMakeLists.txt's target_link_libraries and
the folder whose CMakeLists.txt defines the linked target.

Inside core/, the same rule holds between its subsystems (CORE_LAYERS:
the folders of core/src, and the files at core/src's top above them): a
file of core/src may include a header of its own subsystem or of a lower
one, never a sibling's or a higher one's.  Since every edge must point
strictly down, the rule admits no cycle; a cycle is reported as such.

    check_layers.py SOURCE_DIR            exit 0, or 1 listing every bad edge
    check_layers.py SOURCE_DIR --graph    print the folder graph it found
"""
import os
import re
import sys

# Lower numbers sit lower.  Folders of one layer may not depend on each
# other either (hip_shim and fsm are both at the bottom).
LAYERS = {
    "hip_shim": 0,
    "fsm": 0,
    "core": 1,
    "faultinject": 2,
    "tools": 3,
    "torch": 4,
    "fuzz": 4,
    "examples": 5,
    "bench": 5,
    "tests": 5,
}

# core/src's subsystems, bottom up (core/src/base/base.h says what each
# holds); "core/src" is the files at its top (process.c).  A file elsewhere
# in core/ (internal/, include/, kernels/) is below them all.
CORE_LAYERS = {
    "core/src/base": 0,
    "core/src/alloc": 1,
    "core/src/signal": 2,
    "core/src/rendezvous": 3,
    "core/src": 4,
}

SKIP_DIRS = {".git", "docs", "scripts", "cmake"}
SOURCE_EXT = (".c", ".h", ".cpp", ".hpp", ".cc")


def folder_of(rel):
    return rel.split(os.sep, 1)[0]


def subsystem_of(rel):
    """The core subsystem a file of core/src is in, or None."""
    d = os.path.dirname(rel).replace(os.sep, "/")
    while d and d not in CORE_LAYERS:
        d = os.path.dirname(d)
    return d or None


def find_cycle(edges):
    """One cycle of the graph edges ({(a, b): where}) as a list, or None."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(succ.get(n, [])):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(succ):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def walk(root):
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top in SKIP_DIRS or top.startswith(("build", ".")):
            continue
        for d, dirs, files in os.walk(path):
            dirs[:] = sorted(x for x in dirs if not x.startswith("build"))
            for f in sorted(files):
                yield os.path.relpath(os.path.join(d, f), root)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    files = list(walk(root))
    unknown = sorted({folder_of(f) for f in files} - set(LAYERS))
    # by path suffix: "mori/fi.h" -> the files that end so
    by_suffix = {}
    for f in files:
        parts = f.split(os.sep)
        for i in range(len(parts)):
            by_suffix.setdefault("/".join(parts[i:]), []).append(f)

    edges = {}  # (from, to) -> first "file:line" that makes it
    core_edges = {}  # the same between core/src's subsystems

    def edge(src_folder, dst_folder, where):
        if src_folder != dst_folder:
            edges.setdefault((src_folder, dst_folder), where)

    def include_edge(src, dst, where):
        edge(folder_of(src), folder_of(dst), where)
        a, b = subsystem_of(src), subsystem_of(dst)
        if a is not None and b is not None and a != b:
            core_edges.setdefault((a, b), where)

    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    for f in files:
        if not f.endswith(SOURCE_EXT):
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = inc.match(line)
                if not m:
                    continue
                name = m.group(1)
                # a header beside the file wins, as the compiler finds it
                here = os.path.normpath(os.path.join(os.path.dirname(f), name))
                if here in files:
                    include_edge(f, here, "%s:%d" % (f, n))
                    continue
                for dst in sorted(by_suffix.get(name, [])):
                    include_edge(f, dst, "%s:%d (#include \"%s\")" % (f, n, name))

    # targets -> folder that defines them
    define = re.compile(r"add_(?:library|executable)\(\s*([A-Za-z0-9_.+-]+)")
    link = re.compile(r"target_link_libraries\(\s*([^\s)]+)([^)]*)\)", re.S)
    owner, cmakes = {}, [f for f in files if os.path.basename(f) == "CMakeLists.txt"]
    cmakes.append("CMakeLists.txt")
    texts = {}
    for f in cmakes:
        p = os.path.join(root, f)
        if not os.path.exists(p):
            continue
        texts[f] = open(p, encoding="utf-8").read()
        for m in define.finditer(texts[f]):
            owner.setdefault(m.group(1), folder_of(f) if f != "CMakeLists.txt" else None)
    for f, text in texts.items():
        if f == "CMakeLists.txt":
            continue
        for m in link.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            # generator expressions ($<BUILD_INTERFACE:x>) name targets too
            for word in re.findall(r"[A-Za-z0-9_.+-]+", m.group(2)):
                dst = owner.get(word)
                if dst is not None:
                    edge(folder_of(f), dst, "%s:%d (links %s)" % (f, line, word))

    if len(argv) > 2 and argv[2] == "--graph":
        for (a, b), where in sorted(edges.items()) + sorted(core_edges.items()):
            print("%-12s -> %-12s %s" % (a, b, where))
        return 0

    bad = []
    for u in unknown:
        bad.append("folder %s/ has no layer in check_layers.py (add it to LAYERS)" % u)
    for (a, b), where in sorted(edges.items()):
        if a in LAYERS and b in LAYERS and LAYERS[b] >= LAYERS[a]:
            bad.append("%s (layer %d) depends on %s (layer %d): %s"
                       % (a, LAYERS[a], b, LAYERS[b], where))
    for (a, b), where in sorted(core_edges.items()):
        if CORE_LAYERS[b] >= CORE_LAYERS[a]:
            bad.append("%s (core layer %d) depends on %s (core layer %d): %s"
                       % (a, CORE_LAYERS[a], b, CORE_LAYERS[b], where))
    for graph in (edges, core_edges):
        cycle = find_cycle(graph)
        if cycle:
            bad.append("cycle: " + " -> ".join(cycle) + " (" + "; ".join(
                graph[(cycle[i], cycle[i + 1])] for i in range(len(cycle) - 1)) + ")")
    if bad:
        print("folders that do not depend downward only:")
        for b in bad:
            print("  " + b)
        return 1
    print("layers ok: %d folder edges and %d edges between core's subsystems, all downward"
          % (len(edges), len(core_edges)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
