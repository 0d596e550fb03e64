#!/usr/bin/env python3
"""check_docs.py - the reference docs against what the code and the install
say, where a list in prose can drift from its source:

  scenarios DOC LIST    docs/fault-injection.md's scenario table names exactly
                        the scenarios `mori-fi sweep --list` (the file LIST)
                        lists (a row `selftest-*` stands for each selftest-)
  headers DOC INCLUDE   docs/architecture.md's header table and its glossary
                        name exactly the headers installed under INCLUDE/mori
  search SEARCH DOC...  each DOC names the hip backend's search order (the
                        file SEARCH, one name a line, as mori-env-doc --search
                        prints mori/runtime_search.h) in that order, as
                        "name, name, ..., name"
  tools DOC HELP        docs/architecture.md's list of mori-symm's commands
                        (the layer picture and "The tools") is the commands
                        `mori-symm --help` (the file HELP) lists

  packages README        README's "Using the C library" states the package's
                        two names in one paragraph: pkg-config's `mori-symm`
                        and CMake's find_package `mori_symm`

  dated ROOT             the library's and the tools' sources (core, hip_shim,
                        fsm, faultinject, tools) and the reference docs
                        architecture.md, backends.md, fault-injection.md,
                        teardown.md and torch.md carry no dated figure
                        or history: no GPU model's timings (H100, H200), no
                        date, no "before:"; those live in docs/performance.md,
                        docs/results.md and CHANGELOG.md

Prints "docs ok: ..." or one line per difference and "docs FAILED: ...".
"""
import fnmatch
import re
import sys


def fail(problems, what):
    for p in problems:
        print(f"docs: {p}")
    if problems:
        print(f"docs FAILED: {len(problems)} difference(s) in {what}")
        return 1
    print(f"docs ok: {what}")
    return 0


def scenarios(doc, listing):
    listed = [line.split()[0] for line in open(listing) if line.strip()]
    text = open(doc, encoding="utf-8").read()
    start = text.index("Scenarios (each a rank body")
    table = text[start:text.index("\n\n", text.index("\n|", start))]
    rows = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    problems = [f"scenario '{s}' (mori-fi sweep --list) has no row in {doc}'s table"
                for s in listed if not any(fnmatch.fnmatch(s, r) for r in rows)]
    problems += [f"{doc}'s table row '{r}' is no scenario of mori-fi sweep --list"
                 for r in rows if not any(fnmatch.fnmatch(s, r) for s in listed)]
    return fail(problems, f"{doc}'s scenario table: {', '.join(rows)}")


def headers(doc, include):
    import os
    installed = sorted(f"mori/{h}" for h in os.listdir(os.path.join(include, "mori"))
                       if h.endswith(".h"))
    text = open(doc, encoding="utf-8").read()
    problems = []
    rows = [l for l in text.splitlines() if l.startswith("| `mori/")]
    table = sorted({h for l in rows if l.split("|")[3].strip() == "yes"
                    for h in re.findall(r"`(mori/[a-z_]+\.h)`", l.split("|")[1])})
    if table != installed:
        problems.append(f"the header table's installed headers are {', '.join(table)}; "
                        f"the install has {', '.join(installed)}")
    gloss = re.search(r"^\| public header \| a header `cmake --install` puts under "
                      r"`include/mori` \(([^)]*)\)", text, re.M)
    named = sorted(f"mori/{h.strip()}" for h in gloss.group(1).split(",")) if gloss else []
    if named != installed:
        problems.append(f"the glossary's public headers are {', '.join(named) or '(none)'}; "
                        f"the install has {', '.join(installed)}")
    return fail(problems, f"{doc}'s public headers: {', '.join(installed)}")


def search(order_file, docs):
    names = [l.strip() for l in open(order_file) if l.strip()]
    want = ", ".join(names)
    problems = []
    for doc in docs:
        flat = re.sub(r"\s+", " ", open(doc, encoding="utf-8").read().replace("`", ""))
        if not re.search(re.escape(want) + r"(?![\w.])", flat):  # not a prefix of a longer list
            problems.append(f"{doc} does not name the hip search order '{want}'")
    return fail(problems, f"the hip search order {want} in {', '.join(docs)}")


def tools(doc, help_file):
    block = open(help_file).read().split("commands:\n", 1)[1].split("\n\n", 1)[0]
    commands = [c for c in re.findall(r"^  ([a-z][a-z-]*) ", block, re.M) if c != "help"]
    text = open(doc, encoding="utf-8").read()
    problems = []
    layer = re.search(r"mori-symm/ +([a-z, -]+)\n", text)
    prose = re.search(r"`mori-symm` \(([a-z, -]+)\)", text)
    for where, m in (("the layer picture", layer), ("The tools", prose)):
        listed = [c.strip() for c in m.group(1).split(",")] if m else []
        if listed != commands:
            problems.append(f"{where} lists mori-symm's commands as {', '.join(listed)}; "
                            f"mori-symm --help: {', '.join(commands)}")
    return fail(problems, f"{doc}'s mori-symm commands: {', '.join(commands)}")


def packages(readme):
    text = open(readme, encoding="utf-8").read()
    section = text.split("## Using the C library", 1)[-1].split("\n## ", 1)[0]
    words = ("pkg-config", "`mori-symm`", "find_package", "`mori_symm`")
    together = [p for p in section.split("\n\n") if all(w in p for w in words)]
    problems = [] if together else [
        f"{readme}'s \"Using the C library\" has no paragraph naming {', '.join(words)}"]
    return fail(problems, f"{readme} names pkg-config's mori-symm and CMake's mori_symm together")


def dated(root):
    import os
    pattern = re.compile(r"\bH[12]00s?\b|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b|\bbefore:")
    files = [os.path.join(root, "docs", d)
             for d in ("architecture.md", "backends.md", "fault-injection.md", "teardown.md",
                       "torch.md")]
    for folder in ("core", "hip_shim", "fsm", "faultinject", "tools"):
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            files += [os.path.join(dirpath, n) for n in sorted(names)
                      if n.endswith((".c", ".h", ".cu", ".cpp"))]
    problems = []
    for f in files:
        for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
            m = pattern.search(line)
            if m:
                problems.append(f"{os.path.relpath(f, root)}:{n}: '{m.group(0)}': {line.strip()}")
    return fail(problems, f"{len(files)} sources and reference docs free of dated figures")


if __name__ == "__main__":
    step, args = sys.argv[1], sys.argv[2:]
    sys.exit({"scenarios": lambda: scenarios(*args), "headers": lambda: headers(*args),
              "search": lambda: search(args[0], args[1:]), "tools": lambda: tools(*args),
              "packages": lambda: packages(*args), "dated": lambda: dated(*args)}[step]())
