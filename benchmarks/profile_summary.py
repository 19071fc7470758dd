"""Where a worker's Python time went, from a py-spy recording (`--format raw`).

Not a benchmark: the benchmarks' `--profile PREFIX` option records the worker process with
py-spy (`pip install py-spy`) while records go through; this prints, per thread, the share
of samples spent inside each kctl/pyspark/pyarrow function (inclusive) and the top leaf
functions (where the CPU actually was).

    python benchmarks/profile_summary.py PROFILE.txt [--top 25] [--match kctl]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict

IDLE = re.compile(r"\((?:threading|selectors|queue|socket|ssl)\.py\)|wait \(|select \(|poll \(")


def parse(path: str) -> list[tuple[str, list[str], int]]:
    """(thread, frames root first, samples) per collapsed stack."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            thread = frames[0] if frames and frames[0].startswith(("thread", "process")) else ""
            if thread:
                frames = frames[1:]
            if frames and frames[0].startswith("thread"):
                thread, frames = frames[0], frames[1:]
            out.append((thread, frames, int(count)))
    return out


def short(frame: str) -> str:
    """'fn (path/to/module.py:12)' as 'fn (module.py)'."""
    m = re.match(r"(.*) \((.*?):?\d*\)$", frame)
    if not m:
        return frame
    name, path = m.groups()
    return f"{name} ({path.rsplit('/', 1)[-1].rstrip(':')})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default="kctl/|pyspark/|pyarrow/|py4j/|confluent_kafka",
                        help="regex of the frames to report inclusively")
    args = parser.parse_args()
    stacks = parse(args.profile)
    by_thread: dict[str, int] = Counter()
    busy: dict[str, int] = Counter()
    inclusive: dict[str, Counter] = defaultdict(Counter)
    leaf: dict[str, Counter] = defaultdict(Counter)
    match = re.compile(args.match)
    for thread, frames, n in stacks:
        name = re.sub(r"\s*\(?0x[0-9a-f]+\)?|\d+$", "", thread).strip() or "?"
        by_thread[name] += n
        if frames and IDLE.search(frames[-1]):
            continue
        busy[name] += n
        seen = set()
        for fr in frames:
            if match.search(fr):
                s = short(fr)
                if s not in seen:
                    inclusive[name][s] += n
                    seen.add(s)
        if frames:
            leaf[name][short(frames[-1])] += n
    total = sum(by_thread.values())
    print(f"{total} samples in {len(by_thread)} thread kinds (idle = waiting in "
          "threading/selectors/queue/socket)")
    for name, n in by_thread.most_common():
        if not busy[name]:
            continue
        print(f"\n== {name}: {n} samples, busy {busy[name]} ({busy[name] / n:.0%})")
        print("  inclusive (share of the thread's busy samples):")
        for fn, k in inclusive[name].most_common(args.top):
            print(f"    {k / busy[name]:6.1%}  {fn}")
        print("  leaves:")
        for fn, k in leaf[name].most_common(max(8, args.top // 3)):
            print(f"    {k / busy[name]:6.1%}  {fn}")


if __name__ == "__main__":
    main()
