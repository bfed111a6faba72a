"""The training compute of an experiment's runs: `run` sums each finished process's timed laps
(timing.csv's time/*_s: rollout, update or an off-policy file's train seconds; not the CPU
columns or the rate) per arm and env into results/compute.csv, and the page states the CPU-hours
from it."""

from __future__ import annotations

import shutil
from pathlib import Path

from controlrl import experiment as sweep
from paper_figures.lab import pages, runner, spec

SOURCE = spec.FIGURES / "trust-region-1m-20"


def test_compute_sums_each_finished_process_and_the_page_states_its_hours(tmp_path):
    folder = tmp_path / "declared"
    shutil.copytree(SOURCE, folder, ignore=shutil.ignore_patterns("results", "*.md"))
    exp = spec.load(folder)
    # ppo and spo: one population process each; trpo: one process per seed (its arm's mode)
    seconds = {"ppo": [1000.0, 800.0], "spo": [2000.0, 1600.0], "trpo-separate": [10.0, 2.0]}
    for name, config in runner.configs(exp).items():
        for task in sweep.plan(config, runner.base(exp, False, tmp_path / "sweeps") / name):
            run_dir = Path(task.run_dir)
            run_dir.mkdir(parents=True)
            rows = [f"{i},1.0,{r},{r / 4},9.0" for i, r in enumerate(seconds.get(name, []))]
            head = "step,time/sps,time/rollout_s,time/update_s,time/update_s_cpu\n"
            text = head + "\n".join(rows) + "\n"
            (run_dir / "timing.csv").write_text(text)
            if name in seconds:  # bpo's and fixpo's processes are not finished: not counted
                (run_dir / "final_eval.json").write_text("{}")
    compute = runner.collect_compute(exp, False, tmp_path / "sweeps")
    assert compute == [
        {"env": "Hopper-v5", "arm": "ppo", "processes": 1, "seeds": 20, "train_s": "2250"},
        {"env": "Hopper-v5", "arm": "trpo", "processes": 20, "seeds": 20, "train_s": "300"},
        {"env": "Hopper-v5", "arm": "spo", "processes": 1, "seeds": 20, "train_s": "4500"},
    ]
    assert pages._compute(exp) == []  # no table, no section
    (folder / "results").mkdir()
    (folder / "results" / "compute.csv").write_text(
        "env,arm,processes,seeds,train_s\nHopper-v5,ppo,1,20,2250\nHopper-v5,spo,1,20,4500\n"
    )
    text = "\n".join(pages._compute(exp))
    assert "Compute: 1.9 CPU-hours of training" in text
    assert (
        "| PPO | Hopper-v5 | 1 | 20 | 0.62 |" in text
        and "| SPO | Hopper-v5 | 1 | 20 | 1.25 |" in text
    )
