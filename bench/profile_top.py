"""Top-N table of a py-spy profile (``--format raw``: collapsed stacks with sample counts).

    py-spy record --format raw -o /tmp/big.txt --rate 40 -- python -m bench.bench_big_documents --pages 150
    python bench/profile_top.py /tmp/big.txt [N]

Prints, for every function, the share of all samples in which it is on the stack (inclusive) and
on top of it (self), as a Markdown table.
"""

from __future__ import annotations

import sys
from collections import Counter


def _name(frame: str) -> str:
    func, _, where = frame.partition(" (")
    return f"{func} ({where.split(':')[0].rsplit('/', 1)[-1]})" if where else func


def main() -> None:
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            stack, _, count = line.rstrip().rpartition(" ")
            n = int(count)
            frames = [_name(f) for f in stack.split(";")]
            total += n
            for name in set(frames):
                inclusive[name] += n
            own[frames[-1]] += n
    print(f"{total} samples\n\n| function | on the stack | on top |\n|---|---:|---:|")
    for name, n in inclusive.most_common(top):
        print(f"| `{name}` | {n / total:.1%} | {own[name] / total:.1%} |")


if __name__ == "__main__":
    main()
