"""seed_everything's deterministic switch: torch's flag set both ways, without importing
torch._inductor (seconds of every process start), and through the public call once Inductor is
loaded (so torch.compile users get Inductor's deterministic flag too)."""

import subprocess
import sys

from timeouts import scaled

PROBE = """
import sys, torch
from controlrl.seeding import seed_everything
{before}
seed_everything(3, {mode})
print(torch.are_deterministic_algorithms_enabled(),
      torch.is_deterministic_algorithms_warn_only_enabled(),
      "torch._inductor" in sys.modules, torch.initial_seed())
{after}
"""


def _probe(mode: bool, before: str = "", after: str = "") -> list[str]:
    code = PROBE.format(mode=mode, before=before, after=after)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_deterministic_flag_set_without_importing_inductor():
    assert _probe(True) == ["True", "True", "False", "3"]
    assert _probe(False) == ["False", "True", "False", "3"]  # warn_only as passed


def test_with_inductor_loaded_its_flag_follows():
    out = _probe(
        True,
        before="import torch._inductor.config",
        after="import torch._inductor.config as c; print(c.deterministic)",
    )
    assert out == ["True", "True", "True", "3", "True"]
