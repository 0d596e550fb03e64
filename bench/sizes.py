"""bench/sizes.py - byte counts as the benchmarks write them (64K, 4M, 1G),
for all2all.py and compare.py (which must not need torch to read them)."""

from __future__ import annotations

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """ "256K", "4MiB", "1m" or a plain number of bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def size_label(size: int) -> str:
    """The shortest exact spelling: 262144 -> "256K"; 1000 -> "1000"."""
    for unit, scale in sorted(UNITS.items(), key=lambda u: -u[1]):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)
