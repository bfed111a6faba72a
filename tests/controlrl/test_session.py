"""controlrl.session and the on-policy Run on it, tested with a tiny algorithm of this file
(a vanilla policy gradient through the shared update loop), not through any algos/ script:
resume restores everything bit for bit, each iteration is logged once, NaN stops the run with
the last good checkpoint kept, evaluation and checkpoint cadence."""

from __future__ import annotations

import copy
import csv
from dataclasses import dataclass

import pytest
import torch

from controlrl import checkpoint
from controlrl.cli import CommonArgs, parse
from controlrl.diagnostics import NonFiniteError
from controlrl.nets import ValueNet, make_policy
from controlrl.seeding import reset_seed
from controlrl.session import Session
from controlrl.training import Run
from controlrl.update import actor_critic_loss, adam, minibatch_update


@dataclass
class ToyArgs(CommonArgs):
    env_id: str = "Pendulum-v1"
    num_envs: int = 2
    num_steps: int = 32
    total_timesteps: int = 256  # 4 iterations of 64 steps
    gamma: float = 0.99
    gae_lambda: float = 0.95
    norm_obs: bool = True
    norm_reward: bool = True
    learning_rate: float = 3e-3
    anneal_lr: bool = True
    update_epochs: int = 2
    num_minibatches: int = 2
    max_grad_norm: float = 0.5
    norm_adv: bool = True
    clip_vloss: bool = False
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    eval_every: int = 0
    eval_episodes: int = 1
    checkpoint_every: int = 1
    tensorboard: bool = False
    progress: bool = False


def pg_loss(logp, old_logp, adv):
    return -(logp * adv).mean(), {}


class Killed(Exception):
    """Stands for a SIGKILL between two iterations."""


def train(
    args: ToyArgs,
    snapshots: dict | None = None,
    nan_at: int | None = None,
    restart_at: int | None = None,
    kill_after: int | None = None,
) -> Run:
    """The toy algorithm: Run's loop written out, so a test can look inside it. restart_at: after
    that iteration, restart every env as a resume does (the process resume claims to equal);
    kill_after: stop dead after that iteration, files left as a kill leaves them."""
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, (8,))
    value_net = ValueNet(run.obs_dim, (8,))
    optimizer = adam(policy, value_net, lr=args.learning_rate)
    loss_fn = actor_critic_loss(policy, value_net, pg_loss, 0.2, args)
    stateful = dict(policy=policy, value=value_net, optimizer=optimizer)
    if snapshots is not None:  # what start() restored, before and after the envs' reset
        reset = run.collector.reset
        run.collector.reset = lambda seed: (
            snapshots.update(start=state_of(run, stateful)),
            reset(seed),
            snapshots.update(reset=state_of(run, stateful)),
        )
    iterations = run.start(**stateful)
    if snapshots is not None:  # what the first iteration begins with
        snapshots["begin"] = state_of(run, stateful) | envs_of(run)
    for iteration in iterations:
        batch, episodes = run.collect(policy, value_net)
        with run.update(policy, batch, 0.2) as stats:
            stats.update(minibatch_update(optimizer, batch, loss_fn, args))
            if iteration == nan_at:
                raise NonFiniteError("injected NaN")
        run.end_iteration(iteration, stats, episodes, act=policy.mode)
        if snapshots is not None:
            snapshots[iteration] = state_of(run, stateful) | envs_of(run)
        if iteration == restart_at:
            run.collector.reset(seed=reset_seed(args.seed, iteration))
        if iteration == kill_after:
            raise Killed
    run.finish(policy.mode)
    return run


def state_of(run: Run, stateful: dict) -> dict:
    """Everything a resume must restore, deep-copied: modules, optimiser, normalisers, RNG."""
    state = {k: copy.deepcopy(v.state_dict()) for k, v in stateful.items()}
    state["obs_normalizer"] = copy.deepcopy(run.obs_normalizer.state_dict())
    state["reward_scaler"] = copy.deepcopy(run.reward_scaler.state_dict())
    state["rng"] = torch.get_rng_state().clone()
    return state


def envs_of(run: Run) -> dict:
    """The collector's side of a run: the envs mid-episode and what the policy acts on next."""
    return {"collector": copy.deepcopy(run.collector.state_dict())}


def assert_bit_identical(a, b, path="state"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_bit_identical(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_bit_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), path
    else:
        assert a == b, path


def steps_logged(run_dir) -> list[int]:
    with (run_dir / "metrics.csv").open() as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def test_resume_continues_the_uninterrupted_run_bit_for_bit(tmp_path):
    """Killed mid-episode after iteration 2 of 4, a resumed run puts back everything, the envs
    included (Pendulum's episodes are 200 steps: none ends at the checkpoint), never resets
    them, and ends as the uninterrupted run: every state and every metrics.csv byte."""
    args = ToyArgs(num_envs=3, total_timesteps=384)  # 4 iterations of 96 steps
    whole: dict = {}
    train(ToyArgs(**{**vars(args), "run_dir": str(tmp_path / "whole")}), snapshots=whole)
    half = tmp_path / "half"
    train(ToyArgs(**{**vars(args), "run_dir": str(half), "total_timesteps": 192}))  # 2 its
    resumed: dict = {}
    train(ToyArgs(**{**vars(args), "run_dir": str(half), "resume": str(half)}), resumed)
    assert "start" not in resumed  # no env was reset
    assert_bit_identical(resumed["begin"], whole[2])
    assert_bit_identical(resumed[4], whole[4])
    assert (half / "metrics.csv").read_bytes() == (tmp_path / "whole" / "metrics.csv").read_bytes()
    assert steps_logged(half) == [96, 192, 288, 384]
    # the comparisons are not between fresh states: the normalisers have moved and the
    # episodes are under way at the checkpoint
    assert whole[2]["obs_normalizer"]["count"] > 1
    assert (whole[2]["reward_scaler"]["returns"] != 0).all()
    assert (whole[2]["collector"]["ep_length"] == 192 // 3).all()


def test_a_checkpoint_without_the_envs_resumes_with_fresh_episodes(tmp_path):
    """A checkpoint that does not hold the envs (written before they were saved; envs
    envs.state cannot capture save none) resumes as the uninterrupted run with every env
    restarted at the checkpoint's iteration boundary (fresh episodes from
    reset_seed(seed, iteration)), bit for bit; the restart folds each env's reset observation
    into the observation statistics once and zeroes the reward scaler's per-env running
    returns."""
    args = ToyArgs(num_envs=3, total_timesteps=384)  # 4 iterations of 96 steps
    restarted: dict = {}
    train(ToyArgs(**{**vars(args), "run_dir": str(tmp_path / "r")}), restarted, restart_at=2)
    half = tmp_path / "half"
    train(ToyArgs(**{**vars(args), "run_dir": str(half), "total_timesteps": 192}))  # 2 its
    path = Session.checkpoint_path(half)
    state = checkpoint.load(path)
    assert state.pop("collector")["envs"]  # saved, and taken out as an older checkpoint lacks it
    checkpoint.save(path, state)
    resumed: dict = {}
    train(ToyArgs(**{**vars(args), "run_dir": str(half), "resume": str(half)}), resumed)
    before, after = restarted[2], restarted["reset"]
    assert_bit_identical(resumed["start"], {k: v for k, v in before.items() if k != "collector"})
    assert_bit_identical(resumed["reset"], after)
    assert_bit_identical(resumed[4], restarted[4])
    rows = (tmp_path / "r" / "metrics.csv").read_bytes()
    assert (half / "metrics.csv").read_bytes() == rows
    # the resumed run's checkpoints hold the envs again
    assert checkpoint.load(path)["collector"]["envs"]
    # what the restart did, computed from its definition, not from the code under test
    returns = before["reward_scaler"]["returns"]
    assert returns.shape == (3,) and (returns != 0).all()  # mid-episode when the run stopped
    assert (after["reward_scaler"]["returns"] == 0).all()  # those episodes are gone
    assert after["obs_normalizer"]["count"] == before["obs_normalizer"]["count"] + 3  # once
    for key in ("mean", "var", "count"):  # the scaler's statistics are kept as they were
        assert torch.equal(after["reward_scaler"][key], before["reward_scaler"][key])
    # and the restart changed the run (else the comparisons above would be vacuous)
    uninterrupted: dict = {}
    train(ToyArgs(**{**vars(args), "run_dir": str(tmp_path / "u")}), uninterrupted)
    assert_bit_identical(uninterrupted[2], before)
    u_rows = (tmp_path / "u" / "metrics.csv").read_text().splitlines()
    r_rows = rows.decode().splitlines()
    assert u_rows[:3] == r_rows[:3] and u_rows[3] != r_rows[3] and u_rows[4] != r_rows[4]


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(tmp_path, capsys):
    """Killed before its first checkpoint, a run directory holds config.json and metrics rows
    only; --resume starts it again from step 0 with its config and drops the rows, so it ends
    as the uninterrupted run, byte for byte."""
    args = ToyArgs(checkpoint_every=3)  # 4 iterations: checkpoints after 3 and 4
    whole = tmp_path / "whole"
    train(ToyArgs(**{**vars(args), "run_dir": str(whole)}))
    killed = tmp_path / "killed"
    with pytest.raises(Killed):
        train(ToyArgs(**{**vars(args), "run_dir": str(killed)}), kill_after=2)
    assert steps_logged(killed) == [64, 128]
    assert not Session.checkpoint_path(killed).exists()
    (killed / "tb").mkdir()
    (killed / "tb" / "events.out.tfevents.stale").write_text("x")  # the killed run's events
    capsys.readouterr()
    resumed = parse(ToyArgs, ["--resume", str(killed)])  # no 'checkpoint not found'
    assert resumed.run_dir == str(killed) and resumed.checkpoint_every == 3
    train(resumed)
    assert "starting it again from step 0" in capsys.readouterr().out
    assert steps_logged(killed) == [64, 128, 192, 256]
    assert (killed / "metrics.csv").read_bytes() == (whole / "metrics.csv").read_bytes()
    assert not (killed / "tb").exists()
    assert_bit_identical(
        checkpoint.load(Session.checkpoint_path(killed)),
        checkpoint.load(Session.checkpoint_path(whole)),
    )


def test_a_different_stateful_object_is_not_silently_restored(tmp_path):
    run_dir = tmp_path / "r"
    train(ToyArgs(run_dir=str(run_dir), total_timesteps=64))
    session = Session(ToyArgs(run_dir=str(run_dir), resume=str(run_dir)), 64)
    with pytest.raises(SystemExit) as exc:
        session.start(critic=torch.nn.Linear(2, 2))  # a key the checkpoint lacks
    assert exc.value.code == 2


def test_a_checkpoint_of_another_algorithm_is_not_resumed(tmp_path, capsys):
    """The checkpoint holds the name of the algorithm that wrote it (this file's, here); a
    Session of another refuses it in one line, exit 2, as it refuses a negative step."""
    run_dir = tmp_path / "r"
    train(ToyArgs(run_dir=str(run_dir), total_timesteps=64))
    path = Session.checkpoint_path(run_dir)
    state = checkpoint.load(path)
    assert state["algo"] == "test_session"
    for edit, fragment in (({"algo": "dpo"}, "written by 'dpo'"), ({"step": -64}, "[step] is -64")):
        checkpoint.save(path, {**state, **edit})
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            Session(ToyArgs(run_dir=str(run_dir), resume=str(run_dir)), 64)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "r"
    snapshots: dict = {}
    with pytest.raises(SystemExit) as exc:
        train(ToyArgs(run_dir=str(run_dir)), snapshots=snapshots, nan_at=3)
    assert exc.value.code == 1
    assert "injected NaN" in capsys.readouterr().err
    state = checkpoint.load(Session.checkpoint_path(run_dir))
    assert state["iteration"] == 2 and state["step"] == 128
    assert_bit_identical(state["policy"], snapshots[2]["policy"])
    assert steps_logged(run_dir) == [64, 128]
    assert not (run_dir / "final_eval.json").exists()


class Counter:
    """A stateful object for Session-only tests."""

    def __init__(self) -> None:
        self.n = torch.zeros((), dtype=torch.int64)

    def state_dict(self) -> dict:
        return {"n": self.n.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.n = state["n"].clone()


def test_session_cadences_without_any_env(tmp_path):
    """Backend-neutral: evaluation when the step count crosses eval_every, checkpoints every
    checkpoint_every iterations and after the last, final_eval.json at the end."""
    args = ToyArgs(
        run_dir=str(tmp_path / "s"), total_timesteps=500, eval_every=150, checkpoint_every=2
    )
    session = Session(args, steps_per_iteration=100)  # 5 iterations
    counter, evals, saved = Counter(), [], []
    session.save_checkpoint = lambda it, save=session.save_checkpoint: (saved.append(it), save(it))
    for iteration in session.start(counter=counter):
        counter.n += 1
        session.step += 100
        session.end_iteration(iteration, {"x": 1.0}, evaluate=lambda: evals.append(1) or 7.0)
    session.finish(lambda: 9.0)
    with (tmp_path / "s" / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    evaluated = [int(r["step"]) for r in rows if r["eval/return"] != "nan"]
    assert evaluated == [200, 300, 500]  # crossing 150, 300, 450
    assert saved == [2, 4, 5]
    assert checkpoint.load(Session.checkpoint_path(tmp_path / "s"))["counter"]["n"] == 5
    assert '"eval_return_mean": 9.0' in (tmp_path / "s" / "final_eval.json").read_text()


def test_keep_checkpoints_keeps_one_file_per_checkpoint(tmp_path):
    """--keep-checkpoints: every checkpoint also stays as step_<step>.pt (not racing anyone
    who reads them later, e.g. the dataset generator); without it only latest.pt exists."""
    for keep in (True, False):
        run_dir = tmp_path / f"keep{keep}"
        args = ToyArgs(run_dir=str(run_dir), total_timesteps=500, checkpoint_every=2)
        args.keep_checkpoints = keep
        session = Session(args, steps_per_iteration=100)  # 5 iterations: saved after 2, 4, 5
        counter = Counter()
        for iteration in session.start(counter=counter):
            counter.n += 1
            session.step += 100
            session.end_iteration(iteration, {"x": 1.0})
        session.finish(lambda: 0.0)
        kept = sorted(p.name for p in (run_dir / "checkpoints").glob("step_*.pt"))
        if not keep:
            assert kept == []
            continue
        assert kept == ["step_000000200.pt", "step_000000400.pt", "step_000000500.pt"]
        for name, n in zip(kept, (2, 4, 5)):
            state = checkpoint.load(run_dir / "checkpoints" / name)
            assert state["counter"]["n"] == n and state["step"] == 100 * n


def test_background_checkpoint_holds_the_state_at_save_and_reports_a_failed_landing(
    tmp_path, monkeypatch
):
    """background_checkpoints: save_checkpoint returns before the fsync and rename; the file
    holds the state as it was at the call (training changing it in place afterwards), the
    next save waits for the previous one, and a landing that fails raises at the next wait."""
    args = ToyArgs(run_dir=str(tmp_path / "run"))
    session = Session(args, steps_per_iteration=64)
    session.background_checkpoints = True
    weights = torch.arange(4.0)
    session.stateful = {"net": torch.nn.ParameterDict({"w": torch.nn.Parameter(weights)})}
    path = session.checkpoint_path(session.run_dir)
    landed = []
    commit = checkpoint.commit

    def slow_commit(tmp, dest):
        __import__("time").sleep(0.2)
        commit(tmp, dest)
        state = torch.load(dest, weights_only=True)
        landed.append((state["step"], float(state["net"]["w"][0])))

    monkeypatch.setattr(checkpoint, "commit", slow_commit)
    session.step = 64
    session.save_checkpoint(1)
    assert not path.exists()  # still landing
    with torch.no_grad():
        session.stateful["net"]["w"].add_(100.0)  # training goes on
    session.step = 128
    session.save_checkpoint(2)  # waits for the first
    assert landed == [(64, 0.0)]  # the weights as they were at the first save
    session.wait_checkpoint()
    assert landed == [(64, 0.0), (128, 100.0)]
    state = checkpoint.load(path)
    assert torch.equal(state["net"]["w"], torch.arange(4.0) + 100.0) and state["step"] == 128

    def failing_commit(tmp, dest):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "commit", failing_commit)
    session.save_checkpoint(3)
    with pytest.raises(OSError, match="No space"):
        session.wait_checkpoint()
    session.wait_checkpoint()  # reported once
    session.release()
