"""paper_figures/lab/script_flags.py: the sweep flags' defaults, the list and env-id checks
(exit 2 naming the flag), and the closing line with the command that made the outputs."""

import pytest

from controlrl.cli import ArgumentParser
from paper_figures.lab import script_flags


def test_sweep_flags_defaults_follow_the_script_and_the_switches():
    p = ArgumentParser()
    script_flags.add_sweep_flags(p, "fig", workers=2, algo="ppo")
    args = p.parse_args(["--", "--seed", "3"])
    assert args.sweep_dir == script_flags.ROOT / "runs" / "sweeps" / "fig"
    assert (args.out, args.name, args.workers) == (script_flags.OUT, "fig", 2)
    assert not (args.train or args.toy or args.replot) and args.extra == ["--seed", "3"]
    p = ArgumentParser()
    script_flags.add_sweep_flags(p, "fig", replot=False, sweep_dir=False)
    args = p.parse_args([])
    assert args.sweep_dir is None and not hasattr(args, "replot") and not hasattr(args, "extra")


def test_list_and_env_checks_exit_2_naming_the_flag(capsys):
    p = ArgumentParser()
    assert script_flags.some_of(p, "kinds", "a,c", ("a", "b", "c")) == ["a", "c"]
    with pytest.raises(SystemExit) as exc:
        script_flags.some_of(p, "kinds", "a,x", ("a", "b"))
    assert exc.value.code == 2 and "--kinds: unknown ['x']" in capsys.readouterr().err
    script_flags.check_episodic_env(p, "Hopper-v5", "needs episodes")
    for env_id, said in (("bandit:bimodal", "a bandit; needs episodes"), ("Nope-v0", "--env-id")):
        with pytest.raises(SystemExit) as exc:
            script_flags.check_episodic_env(p, env_id, "needs episodes")
        assert exc.value.code == 2 and said in capsys.readouterr().err


def test_wrote_names_the_outputs_and_the_command(capsys):
    script_flags.wrote("out/x.csv", "fig", ["--seeds", "2", "--name", "a b"])
    assert capsys.readouterr().out == (
        "wrote out/x.csv; command: python paper_figures/fig.py --seeds 2 --name 'a b'\n"
    )
