"""The objective-zoo figure (paper_figures/objective_zoo.py): the toy run end to end (per-seed
rows from each population run's own metrics.csv and final_eval.json, success over the bandit's
optimum, the paired difference to GRPO over the same seeds), the pairing itself, bad flags."""

import csv
import importlib.util
import json

import numpy as np
import pytest

from controlrl import stats
from envs import bandits

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _zoo():
    spec = importlib.util.spec_from_file_location(
        "objective_zoo", ROOT / "paper_figures/objective_zoo.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_toy_run_rows_come_from_the_runs_and_pair_with_grpo(tmp_path, capsys):
    """--toy --train: grpo and rgra-no-negatives, 3 seeds each in one population run, 128 pulls
    in 2 rollouts of 64; final success and AUC = train/episode_return over 0.935 (the instance's
    best arm), final_eval = final_eval.json's per-seed return over it, and the summary's paired
    difference = the mean of the per-seed differences."""
    zoo = _zoo()
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    zoo.main(["--toy", "--train", "--sweep-dir", str(sweep), "--out", str(out)])
    assert "rgra-no-negatives" in capsys.readouterr().out
    optimal = float(bandits.make("bernoulli-10", 1).optimal_reward)
    assert optimal < 0.95  # so a raw reward would not pass for a success
    rows = list(csv.DictReader((out / "objective_zoo.csv").open()))
    assert list(rows[0]) == list(zoo.RUN_FIELDS)
    assert [(r["objective"], r["seed"]) for r in rows] == [
        (o, s) for o in ("grpo", "rgra-no-negatives") for s in ("1", "2", "3")
    ]
    for objective in ("grpo", "rgra-no-negatives"):
        run = sweep / "bernoulli-10" / objective / "population"
        final = json.loads((run / "final_eval.json").read_text())
        metrics = list(csv.DictReader((run / "metrics.csv").open()))
        for r in (r for r in rows if r["objective"] == objective):
            mine = [float(m["train/episode_return"]) for m in metrics if m["seed"] == r["seed"]]
            assert len(mine) == 2  # 128 pulls / 64 per rollout
            # the final window (1,280 pulls) covers the whole toy run: final = mean = AUC
            assert float(r["auc"]) == pytest.approx(np.mean(mine) / optimal, rel=1e-5)
            assert float(r["final_success"]) == pytest.approx(np.mean(mine) / optimal, rel=1e-5)
            k = final["seeds"].index(int(r["seed"]))
            assert float(r["final_eval"]) == pytest.approx(
                final["eval_return_per_seed"][k] / optimal, rel=1e-5
            )
    config = json.loads(
        (sweep / "bernoulli-10/rgra-no-negatives/population/config.json").read_text()
    )["args"]
    assert (config["policy_loss"], config["drop_negatives"], config["num_seeds"]) == (
        "reinforce",
        True,
        3,
    )
    table = {t["objective"]: t for t in csv.DictReader((out / "objective_zoo_summary.csv").open())}
    assert table["grpo"]["auc_diff"] == ""
    auc = {o: np.array([float(r["auc"]) for r in rows if r["objective"] == o]) for o in table}
    assert float(table["rgra-no-negatives"]["auc_diff"]) == pytest.approx(
        (auc["rgra-no-negatives"] - auc["grpo"]).mean(), abs=2e-6
    )
    assert float(table["grpo"]["auc"]) == pytest.approx(auc["grpo"].mean(), abs=2e-6)


def test_summary_pairs_by_seed_not_by_position():
    """Seeds listed in another order, and one seed only the objective ran: the difference is
    over the seeds both ran, matched by seed."""
    zoo = _zoo()

    def row(objective, seed, v):
        return {"bandit": "b", "objective": objective, "seed": seed, "final_success": v,
                "final_eval": v, "auc": v, "clip_frac": v / 10}  # fmt: skip

    base = {1: 0.1, 2: 0.5, 3: 0.9, 4: 0.3, 5: 0.7, 6: 0.2}
    rows = [row("grpo", s, v) for s, v in base.items()]
    rows += [row("cispo", s, base[s] + 0.01 * s) for s in (6, 5, 4, 3, 2, 1)]
    rows += [row("cispo", 0, 5.0)]  # no GRPO partner: not in the difference
    table = {t["objective"]: t for t in zoo.summary(rows)}
    d = stats.paired([base[s] + 0.01 * s for s in base], list(base.values()))
    assert table["cispo"]["paired_seeds"] == 6
    assert table["cispo"]["auc_diff"] == pytest.approx(0.035)
    assert table["cispo"]["auc_diff_lo"] == pytest.approx(d.diff.lo)
    assert table["cispo"]["auc_p"] == pytest.approx(d.p)
    assert table["cispo"]["seeds"] == 7
    assert table["grpo"]["clip_frac"] == pytest.approx(np.mean(list(base.values())) / 10)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--objectives", "grpo,nope"], "--objectives: unknown ['nope']"),
        (["--num-envs", "12"], "--num-envs must be a multiple of the group size 8"),
        (["--bandits", "bandit:bernoulli-10", "--samples", "10,20"], "--samples: one count"),
    ],
)
def test_bad_flags(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _zoo().parse(flags)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_variable_length_bandit_runs_its_seeds_apart_and_other_rows_are_kept(tmp_path):
    """sequence-stop-2-4 (episodes end at EOS: no population): one run per seed, --samples read
    as env steps, samples counted from train/episodes; GSPO (sequence ratio) applies there, the
    overlong shaping only there; a later bernoulli-10 run keeps these rows in the CSV."""
    zoo = _zoo()
    sweep, out = tmp_path / "sweep", tmp_path / "out"
    flags = ["--toy", "--train", "--sweep-dir", str(sweep), "--out", str(out)]
    stop = ["--bandits", "bandit:sequence-stop-2-4", "--samples", "256", "--seeds", "2"]
    args = zoo.parse([*flags, *stop, "--objectives", "dapo-overlong,gspo"])
    assert args.cells == [("bandit:sequence-stop-2-4", 256, 2, ["grpo", "dapo-overlong", "gspo"])]
    zoo.main([*flags, *stop, "--objectives", "dapo-overlong"])
    rows = list(csv.DictReader((out / "objective_zoo.csv").open()))
    assert [(r["objective"], r["seed"]) for r in rows] == [
        (o, s) for o in ("grpo", "dapo-overlong") for s in ("1", "2")
    ]
    for r in rows:
        run = sweep / "sequence-stop-2-4" / r["objective"] / f"seed_{r['seed']}"
        config = json.loads((run / "config.json").read_text())["args"]
        assert (config["seed"], config["num_seeds"]) == (int(r["seed"]), None)
        assert config["overlong_max"] == (8 if r["objective"] == "dapo-overlong" else None)
        metrics = list(csv.DictReader((run / "metrics.csv").open()))
        assert int(r["samples"]) == 64 * len(metrics) and int(metrics[-1]["step"]) >= 256
        assert float(r["auc"]) == pytest.approx(
            np.mean([float(m["train/episode_return"]) for m in metrics]), rel=1e-5
        )
    assert zoo.parse([*flags, "--objectives", "gspo,dapo-overlong"]).cells[0][3] == ["grpo"]
    zoo.main([*flags, "--objectives", "nft"])  # bernoulli-10 (the toy's): stop's rows stay
    again = list(csv.DictReader((out / "objective_zoo.csv").open()))
    assert [r for r in again if r["bandit"] == "bandit:sequence-stop-2-4"] == rows
    assert {r["objective"] for r in again if r["bandit"] == "bandit:bernoulli-10"} == {
        "grpo",
        "nft",
    }
