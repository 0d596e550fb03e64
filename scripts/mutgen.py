#!/usr/bin/env python3
"""mutgen.py - the mechanical mutants of scripts/mutate.sh.

For the lines a change touches (git diff BASE, or BASE..REV) in the C and
C++ sources of core/, hip_shim/, faultinject/, tools/ and torch/, lists
every mutant of a fixed set of rules, line by line and deterministically
(comments, strings, preprocessor lines and asserts are skipped):

  bound        a boundary moved:      <  <=,  <= <,  >  >=,  >= >
  rel          a relation negated:    <  >=,  <= >,  >  <=,  >= <,  == !=,  != ==
  logic        && for ||, || for &&
  negate       an if/while condition negated: if (c) -> if (!(c))
  const+1      an integer constant plus one
  const-1      an integer constant minus one
  drop-call    a call statement dropped (the whole line: f(...);)
  drop-return  a return dropped in a failure branch
  drop-assign  an assignment dropped in a failure branch
  swap-args    two neighbouring arguments of a call swapped

A mutant's key is a hash of its file, rule, line text before and after
(and which of several identical lines it is), so that it survives line
shifts: tests/mutants/equivalent.tsv marks equivalents by that key.

  mutgen.py list  --base B [--rev R] [--sample N --seed S] [--equivalent F] [--keys F]
  mutgen.py apply MUTANTS_TSV KEY ROOT     plant one mutant in the tree ROOT
"""
import argparse
import hashlib
import os
import random
import re
import subprocess
import sys

AREAS = ("core/", "hip_shim/", "faultinject/", "tools/", "torch/")
SUFFIXES = (".c", ".h", ".cpp", ".cc", ".hpp")
# generated files, checked by their own tests
SKIP_FILES = {"core/kernels/signal_ptx.h"}

RELATIONAL = {
    "<": [("bound", "<="), ("rel", ">=")],
    "<=": [("bound", "<"), ("rel", ">")],
    ">": [("bound", ">="), ("rel", "<=")],
    ">=": [("bound", ">"), ("rel", "<")],
    "==": [("rel", "!=")],
    "!=": [("rel", "==")],
}
KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "case", "do", "else",
            "goto", "break", "continue", "typedef", "struct", "union", "enum",
            "_Alignof", "alignof", "defined", "static_assert", "_Static_assert",
            "decltype", "new", "delete", "throw", "catch", "template", "typename",
            "__attribute__", "format", "__typeof__", "typeof", "offsetof"}
ASSERT_RE = re.compile(r"\b\w*assert\w*\s*\(", re.I)
PUNCT_RE = re.compile(r"<<=|>>=|<<|>>|->|<=|>=|==|!=|&&|\|\||<|>")
INT_RE = re.compile(r"(?<![\w.])(0[xX][0-9a-fA-F]+|[0-9]+)([uUlL]*)(?![\w.'])")
ARRAY_DECL_RE = re.compile(r"^\s*(?:(?:static|const|unsigned|signed|volatile|struct|enum)\s+)*"
                           r"[A-Za-z_]\w*[\s*]+[A-Za-z_]\w*(?:\[[^\]]*\])*\s*\[\s*$")
CALL_STMT_RE = re.compile(r"^(\(void\)\s*)?[A-Za-z_]\w*(\s*(\.|->|::)\s*[A-Za-z_]\w*)*\s*\(")
FAIL_COND_RE = re.compile(r"\b(failed|call)\b|!= hipSuccess|!= CUDA_SUCCESS|\b(rc|err|e|ret|res)\b(?! == 0)|"
                          r"< 0|!= 0|== -1|== NULL|== nullptr|!\s*[A-Za-z_(]|errno|MORI_E|MAP_FAILED")
FAIL_BODY_RE = re.compile(r"\bgoto\b|MORI_E[A-Z]|return\s+-|return\s+NULL|return\s+(rc|err|e|ret)\b|"
                          r"mori__error|mori__nomem|mori__hip_error|\berrno\b")
ASSIGN_RE = re.compile(r"^(\*?[A-Za-z_][\w.\->\[\]*]*)\s*(=|\+=|-=|\|=|&=|\^=|<<=|>>=)(?!=)\s*(.*);$")
DECL_RE = re.compile(r"^(?:const\s+|static\s+|unsigned\s+|struct\s+|enum\s+)*[A-Za-z_][\w:<>]*[\s*&]+[A-Za-z_]\w*\s*(=|\[|;|,)")


def mask_file(lines):
    """Each line with comments, string and character literals blanked
    (their quotes kept), and whether it is code: not a preprocessor line
    (or its continuation), not blank."""
    out = []
    in_comment = False
    continued_pp = False
    for line in lines:
        m = []
        i = 0
        n = len(line)
        in_str = None
        while i < n:
            c = line[i]
            if in_comment:
                if line.startswith("*/", i):
                    in_comment = False
                    m.append("  ")
                    i += 2
                else:
                    m.append(" ")
                    i += 1
            elif in_str:
                if c == "\\" and i + 1 < n:
                    m.append("  ")
                    i += 2
                elif c == in_str:
                    m.append(c)
                    in_str = None
                    i += 1
                else:
                    m.append(" ")
                    i += 1
            elif line.startswith("/*", i):
                in_comment = True
                m.append("  ")
                i += 2
            elif line.startswith("//", i):
                m.append(" " * (n - i))
                break
            elif c in "\"'":
                in_str = c
                m.append(c)
                i += 1
            else:
                m.append(c)
                i += 1
        masked = "".join(m)
        stripped = masked.strip()
        pp = continued_pp or stripped.startswith("#")
        continued_pp = pp and line.rstrip().endswith("\\")
        out.append((masked, not pp and stripped != ""))
    return out


def match_paren(masked, open_at):
    depth = 0
    for i in range(open_at, len(masked)):
        if masked[i] == "(":
            depth += 1
        elif masked[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_args(masked, open_at, close_at):
    """Argument spans (start, end) of the call whose parentheses are at
    open_at and close_at, split at commas of depth 0."""
    spans, depth, start = [], 0, open_at + 1
    for i in range(open_at + 1, close_at):
        c = masked[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, close_at))
    return [s for s in spans if masked[s[0]:s[1]].strip()]


def fail_branches(masked_lines):
    """Line numbers (0-based) lying in a failure branch, with the column
    where the branch's statements start on that line."""
    inside = {}
    for ln, (masked, code) in enumerate(masked_lines):
        if not code:
            continue
        for m in re.finditer(r"\bif\s*\(", masked):
            o = masked.index("(", m.start())
            c = match_paren(masked, o)
            if c < 0:
                continue
            cond = masked[o + 1:c]
            rest = masked[c + 1:].strip()
            body_lines = []
            if rest.startswith("{"):
                depth, j = 0, ln
                col = masked.index("{", c)
                k = col
                while j < len(masked_lines):
                    text = masked_lines[j][0]
                    for p in range(k, len(text)):
                        if text[p] == "{":
                            depth += 1
                        elif text[p] == "}":
                            depth -= 1
                            if depth == 0:
                                break
                    else:
                        body_lines.append((j, k if j == ln else 0))
                        j += 1
                        k = 0
                        continue
                    body_lines.append((j, k if j == ln else 0))
                    break
            elif rest:
                body_lines = [(ln, c + 1)]
            elif ln + 1 < len(masked_lines):
                body_lines = [(ln + 1, 0)]
            body = " ".join(masked_lines[j][0][k:] for j, k in body_lines)
            if FAIL_COND_RE.search(cond) or FAIL_BODY_RE.search(body):
                for j, k in body_lines:
                    if j not in inside or inside[j] > k:
                        inside[j] = k
    return inside


def is_declarator(before):
    """Whether a name followed by ( is declared here (a type before it),
    not called."""
    before = before.rstrip()
    while before.endswith("*") or before.endswith("&"):
        before = before[:-1].rstrip()
    m = re.search(r"([A-Za-z_]\w*)$", before)
    return bool(m) and m.group(1) not in KEYWORDS


def mutants_of_line(line, masked, fail_col):
    """(rule, mutated line) for one line of code."""
    out = []
    if ASSERT_RE.search(masked):
        return out
    for m in PUNCT_RE.finditer(masked):
        op = m.group(0)
        s, e = m.start(), m.end()
        if op in RELATIONAL:
            if op in ("<", ">") and not (s > 0 and masked[s - 1] == " " and e < len(masked)
                                         and masked[e] == " "):
                continue  # a template's brackets, an include
            for rule, new in RELATIONAL[op]:
                out.append((rule, line[:s] + new + line[e:]))
        elif op in ("&&", "||"):
            out.append(("logic", line[:s] + ("||" if op == "&&" else "&&") + line[e:]))
    for m in re.finditer(r"\b(if|while)\s*\(", masked):
        o = masked.index("(", m.start())
        c = match_paren(masked, o)
        if c > o + 1:
            out.append(("negate", line[:o + 1] + "!(" + line[o + 1:c] + ")" + line[c:]))
    for m in INT_RE.finditer(masked):
        s, e = m.start(1), m.end(1)
        if ARRAY_DECL_RE.match(masked[:s]) and masked[e:].lstrip().startswith("]"):
            continue  # an array's size in its declaration
        text = m.group(1)
        value = int(text, 16) if text[:2].lower() == "0x" else int(text, 8 if len(text) > 1 and text[0] == "0" else 10)
        for rule, v in (("const+1", value + 1), ("const-1", value - 1)):
            if v < 0:
                new = "(-1)"
            elif text[:2].lower() == "0x":
                new = "0x%x" % v
            else:
                new = str(v)
            out.append((rule, line[:s] + new + line[e:]))
    stripped = masked.strip()
    indent = line[:len(line) - len(line.lstrip())]
    cm = CALL_STMT_RE.match(stripped)
    if cm and stripped.endswith(");"):
        name = re.match(r"(\(void\)\s*)?([A-Za-z_]\w*)", stripped).group(2)
        o = stripped.index("(", cm.end() - 1)
        if name not in KEYWORDS and match_paren(stripped, o) == len(stripped) - 2:
            out.append(("drop-call", indent + ";"))
    if fail_col is not None:
        seg = masked[fail_col:]
        lead = len(seg) - len(seg.lstrip())
        start = fail_col + lead
        body = masked[start:].rstrip()
        if body.startswith("{"):
            start += 1
            body = body[1:].lstrip()
            start = len(masked) - len(masked[start:].lstrip())
        # one statement, ending the line (or the line's braces)
        end = masked.find(";", start)
        if end >= 0 and masked[end + 1:].strip() in ("", "}"):
            stmt = masked[start:end + 1]
            if re.match(r"return\b", stmt):
                out.append(("drop-return", line[:start] + ";" + line[end + 1:]))
            elif ASSIGN_RE.match(stmt) and not DECL_RE.match(stmt):
                out.append(("drop-assign", line[:start] + ";" + line[end + 1:]))
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", masked):
        if m.group(1) in KEYWORDS or is_declarator(masked[:m.start()]):
            continue
        o = masked.index("(", m.start())
        c = match_paren(masked, o)
        if c < 0:
            continue
        args = split_args(masked, o, c)
        for a, b in zip(args, args[1:]):
            ta, tb = masked[a[0]:a[1]], masked[b[0]:b[1]]
            if ta.strip() == tb.strip() or '"' in ta + tb or "'" in ta + tb:
                continue
            sa, sb = line[a[0]:a[1]], line[b[0]:b[1]]
            # keep each argument's own surrounding blanks where they were
            na = sa[:len(sa) - len(sa.lstrip())] + sb.strip() + sa[len(sa.rstrip()):]
            nb = sb[:len(sb) - len(sb.lstrip())] + sa.strip() + sb[len(sb.rstrip()):]
            out.append(("swap-args", line[:a[0]] + na + line[a[1]:b[0]] + nb + line[b[1]:]))
    return out


def key_of(path, rule, before, after, nth):
    h = hashlib.sha1("\0".join((path, rule, before.strip(), after.strip(), str(nth))).encode())
    return h.hexdigest()[:12]


def git(*args):
    return subprocess.run(("git",) + args, check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def touched_lines(base, rev):
    """{path: set of line numbers (1-based, in the new text)} of the diff."""
    spec = [base, rev] if rev else [base]
    diff = git("diff", "--no-color", "--no-ext-diff", "-U0", "-M", *spec, "--", *AREAS)
    touched, path = {}, None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and path:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            touched.setdefault(path, set()).update(range(start, start + count))
    return {p: s for p, s in touched.items()
            if p.endswith(SUFFIXES) and p not in SKIP_FILES and s}


def read_text(path, rev, root):
    if rev:
        return git("show", "%s:%s" % (rev, path))
    with open(os.path.join(root, path), encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def generate(base, rev, root="."):
    rows = []
    for path in sorted(touched_lines(base, rev).items()):
        path, lines_touched = path
        lines = read_text(path, rev, root).split("\n")
        masked = mask_file(lines)
        fails = fail_branches(masked)
        seen = {}
        for ln in sorted(lines_touched):
            if ln > len(lines) or not masked[ln - 1][1]:
                continue
            line = lines[ln - 1]
            for rule, after in mutants_of_line(line, masked[ln - 1][0], fails.get(ln - 1)):
                if after == line:
                    continue
                ident = (rule, line.strip(), after.strip())
                seen[ident] = seen.get(ident, 0) + 1
                rows.append((key_of(path, rule, line, after, seen[ident]), path, ln, rule, line, after))
    return rows


def esc(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t")


def unesc(s):
    return re.sub(r"\\(.)", lambda m: "\t" if m.group(1) == "t" else m.group(1), s)


def read_keyed(path, col):
    """Keys (column col) of a TSV file, with the rest of each row."""
    keys = {}
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                cols = line.rstrip("\n").split("\t")
                if len(cols) > col:
                    keys[cols[col]] = cols
    return keys


def cmd_list(a):
    rows = generate(a.base, a.rev, a.root)
    total = len(rows)
    rows.sort(key=lambda r: r[0])
    if a.keys:
        wanted = read_keyed(a.keys, 0)
        rows = [r for r in rows if r[0] in wanted]
    elif a.sample and a.sample < len(rows):
        # in the order drawn: the first k of a sample of N are the sample
        # of k with the same seed, so a run cut short is a smaller sample
        rows = random.Random(a.seed).sample(rows, a.sample)
    else:
        rows.sort(key=lambda r: (r[1], r[2], r[0]))
    equivalent = read_keyed(a.equivalent, 1)
    out = sys.stdout
    out.write("# key\tfile\tline\trule\tequivalent (the reason, or -)\tbefore\tafter\n")
    for key, path, ln, rule, before, after in rows:
        eq = equivalent.get(key)
        why = eq[3] if eq and eq[0] == path and len(eq) > 3 else "-"
        out.write("\t".join((key, path, str(ln), rule, esc(why), esc(before), esc(after))) + "\n")
    sys.stderr.write("mutgen: %d mutants in %d touched files, %d listed\n"
                     % (total, len(touched_lines(a.base, a.rev)), len(rows)))


def cmd_apply(a):
    rows = read_keyed(a.mutants, 0)
    row = rows.get(a.key)
    if not row:
        sys.exit("mutgen: no mutant %s in %s" % (a.key, a.mutants))
    path, ln, before, after = row[1], int(row[2]), unesc(row[5]), unesc(row[6])
    target = os.path.join(a.root, path)
    with open(target, encoding="utf-8", errors="surrogateescape", newline="") as f:
        lines = f.read().split("\n")
    if ln > len(lines) or lines[ln - 1] != before:
        sys.exit("mutgen: %s:%d is not the mutant's line any more" % (path, ln))
    lines[ln - 1] = after
    with open(target, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
        f.write("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd")
    lp = sub.add_parser("list")
    lp.add_argument("--base", required=True)
    lp.add_argument("--rev", default=None)
    lp.add_argument("--root", default=".", help="read the files from this copy of the working tree")
    lp.add_argument("--sample", type=int, default=0)
    lp.add_argument("--seed", type=int, default=1)
    lp.add_argument("--equivalent", default="tests/mutants/equivalent.tsv")
    lp.add_argument("--keys", default=None, help="list only the mutants whose keys head this file's rows")
    ap = sub.add_parser("apply")
    ap.add_argument("mutants")
    ap.add_argument("key")
    ap.add_argument("root")
    a = p.parse_args()
    if a.cmd == "list":
        if ".." in a.base:  # a range BASE..REV
            a.base, rev = a.base.split("..", 1)
            a.rev = a.rev or rev or None
        cmd_list(a)
    elif a.cmd == "apply":
        cmd_apply(a)
    else:
        p.print_help()
        sys.exit(2)


if __name__ == "__main__":
    main()
