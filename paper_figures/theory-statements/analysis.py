"""Each theory statement's check: run the pytest node ids the declaration maps it to and record,
per statement, how many passed (results/checks.csv); a statement holds when all of them pass.

`python -m paper_figures run theory-statements` reruns every test (a few minutes); its toy size
runs the first statement's tests alone.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from paper_figures.lab import protocol
from paper_figures.lab.spec import ROOT, Experiment

FIELDS = ["statement", "tests", "passed", "failed", "reason"]


def run_tests(nodes: list[str]) -> dict[str, str]:
    """Outcome ('passed', 'failed', 'skipped' or 'missing') of each pytest node id."""
    outcome = {n: "missing" for n in nodes}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
               "slow or not slow", f"--junitxml={report}", *nodes]  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if "ERROR: not found" in proc.stderr:  # a renamed test: name it instead of failing all
            raise SystemExit(f"theory-statements: {proc.stderr.strip().splitlines()[0]}")
        if not report.exists():
            return outcome
        for case in ET.parse(report).getroot().iter("testcase"):
            path = case.get("classname", "").replace(".", "/") + ".py"
            node = f"{path}::{case.get('name', '').split('[')[0]}"
            status = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    status = "failed"
                elif child.tag == "skipped":
                    status = "skipped"
            if node in outcome and outcome[node] != "failed":
                outcome[node] = status
    return outcome


def run(exp: Experiment, toy: bool, target: Path) -> None:
    """Run the statements' tests (the toy: the first statement's) and write the table."""
    statements = dict(exp.extra["tests"])
    if toy:
        first = next(k for k, v in statements.items() if isinstance(v, list))
        statements = {first: statements[first]}
    nodes = [t for tests in statements.values() if isinstance(tests, list) for t in tests]
    outcome = run_tests(nodes)
    with target.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        writer.writeheader()
        for statement, tests in statements.items():
            if isinstance(tests, str):  # no exact test: the reason instead
                writer.writerow(dict(zip(FIELDS, [statement, "", "0", "0", tests])))
                continue
            passed = sum(outcome[t] == "passed" for t in tests)
            row = [statement, " ".join(tests), str(passed), str(len(tests) - passed), ""]
            writer.writerow(dict(zip(FIELDS, row)))


def judge(exp: Experiment, rows: list[dict]) -> dict[str, protocol.Judgement]:
    """Per statement claimed: holds when every test passed, does not hold when one failed."""
    by_id = {r["statement"]: r for r in rows}
    out = {}
    for claim in exp.claims:
        r = by_id.get(claim.id)
        if r is None:  # a toy table holds one statement
            continue
        count = int(r["passed"]) + int(r["failed"])
        j = protocol.Judgement("exact", n=f"{count} test{'s' * (count != 1)}")
        if r["reason"]:
            j.verdict, j.text = protocol.NOT_RUN, r["reason"]
        else:
            j.verdict = protocol.HOLDS if r["failed"] == "0" else protocol.FAILS
            tests = ", ".join(r["tests"].split())
            j.text = f"{r['passed']} of {j.n} passed: {tests}"
        out[claim.id] = j
    return out
