"""Everything generated from the declarations and their committed results: CLAIMS.md, each
experiment's page, the README blocks (the claims' counts, the index of experiments, and the
figures' and benchmarks' tables of paper_figures/readme_tables.py). `check` compares instead of
writing."""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from pathlib import Path

from paper_figures.lab import ledger, pages, results, spec

README = spec.ROOT / "README.md"
FIGURES_README = spec.FIGURES / "README.md"
COUNTS_BEGIN, COUNTS_END = "<!-- claims:begin -->", "<!-- claims:end -->"


def replace_block(text: str, begin: str, end: str, block: str, name: str) -> str:
    """`text` with the marked block replaced by `block` (which holds the markers)."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{name} lacks the {begin} ... {end} markers")
    return text[:start] + block + text[stop + len(end) :]


def counts_block(lines) -> str:
    counted = ledger.headline(lines)
    every = Counter(ln.verdict for ln in counted)
    parts = [f"{every.get(v, 0)} {v}" for v in ledger.VERDICTS if every.get(v, 0)]
    return (
        f"{COUNTS_BEGIN}\nVerdicts on the papers' claims, one line each, in the claims ledger "
        f"[`paper_figures/CLAIMS.md`](paper_figures/CLAIMS.md): {len(counted)} claims "
        f"({', '.join(parts)}), each declared as an experiment and judged by one protocol, the "
        f"multiplicity adjusted over the ledger.\n{COUNTS_END}"
    )


def inputs_digest(root: Path = spec.FIGURES) -> str:
    """A digest of what the judged texts depend on: every file of every experiment folder but
    the page generated into it."""
    digest = hashlib.blake2b(digest_size=16)
    for folder in spec.discover(root):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path != folder / "README.md" and "__pycache__" not in path.parts:
                digest.update(f"{path.relative_to(root)}\0{path.stat().st_size}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _judged(root: Path, digest: str) -> tuple[dict[Path, str], list, list]:
    # judging (bootstraps, sign flips) is the slow part; `report` then `check` in one process, or
    # tests checking one tree many times, judge the same inputs once
    experiments = spec.load_all(root)
    problems = []
    for exp in experiments:
        problems += [f"{exp.id}: {s}" for s in results.stale(exp, results.rows_of(exp))]
        problems += [f"{exp.id}: {s}" for s in results.stray_curves(exp)]
    if problems:
        raise ValueError("results that the declarations no longer give (rerun them):\n  "
                         + "\n  ".join(problems[:20]))  # fmt: skip
    lines = ledger.judged(experiments)
    texts = {root / "CLAIMS.md": ledger.markdown(lines)}
    history = pages.history_of(lines)
    for exp in experiments:
        rows = results.rows_of(exp)
        texts[exp.folder / "README.md"] = pages.page(exp, lines, rows, history)
    return texts, lines, experiments


def lines(root: Path = spec.FIGURES) -> list:
    """The ledger's lines, judged (once per content of the experiment folders)."""
    return _judged(Path(root), inputs_digest(root))[1]


def outputs(
    root: Path = spec.FIGURES, readme: Path = README, figures_readme: Path = FIGURES_README
) -> tuple[dict[Path, str], list[str]]:
    """{path: text} of everything generated, and the table blocks whose text differs."""
    from paper_figures import readme_tables  # the README blocks of the figures and benches

    judged, lines, experiments = _judged(Path(root), inputs_digest(root))
    texts = dict(judged)
    old, changed = readme_tables.readme_texts(readme, figures_readme)
    texts[readme] = replace_block(old[readme], COUNTS_BEGIN, COUNTS_END,
                                  counts_block(lines), readme.name)  # fmt: skip
    texts[figures_readme] = replace_block(
        old[figures_readme], pages.INDEX_BEGIN, pages.INDEX_END,
        pages.index_block(experiments, lines), figures_readme.name,
    )  # fmt: skip
    return texts, changed


def write() -> dict[str, int]:
    texts, _ = outputs()
    for path, text in texts.items():
        path.write_text(text)
    return {}


def check(
    root: Path = spec.FIGURES, readme: Path = README, figures_readme: Path = FIGURES_README
) -> list[str]:
    """What differs from what the declarations and results give (empty: all in step)."""
    try:
        texts, changed = outputs(root, readme, figures_readme)
    except (ValueError, FileNotFoundError) as exc:
        return [str(exc)]
    stale = [f"{p.relative_to(spec.ROOT) if p.is_relative_to(spec.ROOT) else p} differs from "
             "what the declarations and results give"
             for p, text in texts.items() if not p.exists() or p.read_text() != text]  # fmt: skip
    return stale + [f"{b} differs from what its CSVs give" for b in changed]
