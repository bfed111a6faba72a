"""Killed/total per module from a finished `mutmut run` (reads mutants/**/*.py.meta).

A mutant counts as killed when a test failed, timed out or crashed on it. Mutants listed in
tests/mutation_equivalent.md (equivalent: no test can tell them from the original) are left out
of the fraction. `--diffs` prints the diff of every survivor that is not listed there.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
EQUIVALENT_LIST = Path(__file__).with_name("mutation_equivalent.md")


def statuses() -> dict[str, dict[str, str]]:
    """module -> mutant name -> mutmut status."""
    from mutmut.stats import status_by_exit_code

    out: dict[str, dict[str, str]] = {}
    for meta in sorted(Path("mutants").rglob("*.py.meta")):
        module = ".".join(meta.relative_to("mutants").with_suffix("").with_suffix("").parts)
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        out[module] = {name: status_by_exit_code[code] for name, code in codes.items()}
    return out


def equivalents() -> set[str]:
    """Mutant names listed as equivalent (the first `module.x_...__mutmut_N` on a line)."""
    if not EQUIVALENT_LIST.exists():
        return set()
    pattern = re.compile(r"`?([\w.]+\.x\S*__mutmut_\d+)`?")
    lines = EQUIVALENT_LIST.read_text().splitlines()
    return {m.group(1) for line in lines if (m := pattern.search(line))}


def main() -> int:
    by_module = statuses()
    if not by_module:
        print("no mutants/: run `mutmut run` first", file=sys.stderr)
        return 1
    equiv = equivalents()
    print(f"{'module':28} {'killed':>7} {'total':>6} {'equiv':>6} {'killed %':>9}  survived")
    open_survivors = []
    for module, status in by_module.items():
        # a listed mutant that a test fails on counts as killed (and is named below); one that
        # only timed out stays equivalent (e.g. a loop that no longer stops early)
        counts = Counter(
            "equivalent" if n in equiv and s != "killed" else s for n, s in status.items()
        )
        killed = sum(counts[s] for s in DETECTED)
        total = len(status) - counts["equivalent"]
        left = sorted(n for n, s in status.items() if s not in DETECTED and n not in equiv)
        open_survivors += left
        pct = 100.0 * killed / total if total else 100.0
        n_equiv = counts["equivalent"]
        print(f"{module:28} {killed:7d} {total:6d} {n_equiv:6d} {pct:8.1f}%  {len(left)}")
    stale = equiv - {n for status in by_module.values() for n in status}
    if stale:
        print(f"listed as equivalent but not generated (stale?): {sorted(stale)}")
    wrongly_listed = sorted(
        n for s in by_module.values() for n in equiv & set(s) if s[n] == "killed"
    )
    if wrongly_listed:
        print(f"listed as equivalent but killed (remove from the list): {wrongly_listed}")
    if "--diffs" in sys.argv:
        from mutmut.__main__ import find_mutant
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        for name in open_survivors:
            status = next(s[name] for s in by_module.values() if name in s)
            print(f"\n# {name}: {status}")
            print(get_diff_for_mutant(name, path=find_mutant(name).path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
