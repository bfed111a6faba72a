"""algos/iql.py: the AWR weights and the BC limit, which network each loss reads (the value
target is the TARGET critic's, never the policy's), terminal-only masking, the Polyak update,
--bc equal to --beta 0, the D4RL reward scaling, and tiny runs on an in-memory dataset:
completion, normalised scores, --resume bit for bit, --online-steps, the NaN guard, bad flags."""

from __future__ import annotations

import copy
import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from timeouts import scaled

from algos import iql
from algos.iql import Args, Learner, Nets, awr_loss, q_loss, td_target
from controlrl import checkpoint
from controlrl.buffers import OfflineBuffer
from controlrl.cli import parse
from controlrl.session import Session
from envs.offline import Dataset

REF = (-1500.0, -150.0)  # made-up reference returns for Pendulum: normalised 0 and 100


def rollout_dataset(env_id: str = "Pendulum-v1", steps: int = 400, seed: int = 0) -> Dataset:
    """A D4RL-layout dataset of a uniformly random policy in a Gymnasium env."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows: dict[str, list] = {k: [] for k in ("o", "a", "r", "n", "term", "trunc")}
    for _ in range(steps):
        action = env.action_space.sample()
        nxt, reward, term, trunc, _ = env.step(action)
        for k, v in zip(rows, (obs, action, reward, nxt, term, trunc)):
            rows[k].append(v)
        obs = env.reset()[0] if term or trunc else nxt
    f32 = lambda k: np.asarray(rows[k], np.float32)  # noqa: E731
    return Dataset(
        f32("o"),
        f32("a"),
        f32("r"),
        f32("n"),
        np.asarray(rows["term"]),
        np.asarray(rows["trunc"]),
        env_id,
        ref_min_score=REF[0],
        ref_max_score=REF[1],
    )


def tiny_args(run_dir, **kw) -> Args:
    defaults = dict(
        dataset="<memory>",
        env_id="Pendulum-v1",
        hidden_sizes=(32, 32),
        batch_size=32,
        total_timesteps=60,
        log_every=10,
        eval_every=30,
        eval_episodes=1,
        checkpoint_every=1,
        run_dir=str(run_dir),
        tensorboard=False,
        progress=False,
    )
    return Args(**{**defaults, **kw})


def small_nets(seed: int = 0, obs_dim: int = 3, act_dim: int = 1) -> Nets:
    torch.manual_seed(seed)
    return Nets.build(obs_dim, act_dim, torch.full((act_dim,), 2.0), (16, 16))


# -- the losses ----------------------------------------------------------------------------


def test_awr_weights_are_one_when_q_equals_v_and_never_above_100():
    logp = torch.randn(5)
    _, w = awr_loss(logp, torch.zeros(5), beta=3.0)  # A = Q - V = 0
    assert torch.equal(w, torch.ones(5))
    adv = torch.tensor([50.0, 1.0, -1.0, 1e4, -1e4])
    loss, w = awr_loss(logp, adv, beta=3.0)
    assert w.max() == 100.0 and w[0] == 100.0 and w[3] == 100.0
    assert w[1].item() == pytest.approx(math.exp(3.0)) and w[2].item() == pytest.approx(
        math.exp(-3)
    )
    assert loss.item() == pytest.approx(-(w * logp).mean().item())


def test_beta_zero_is_behaviour_cloning():
    logp = torch.randn(8, requires_grad=True)
    adv = torch.randn(8) * 10
    loss, w = awr_loss(logp, adv, beta=0.0)
    assert torch.equal(w, torch.ones(8))
    (g_awr,) = torch.autograd.grad(loss, logp)
    bc = -logp.mean()
    (g_bc,) = torch.autograd.grad(bc, logp)
    assert loss.item() == bc.item() and torch.equal(g_awr, g_bc)


def test_q_target_masks_terminals_only():
    q = torch.zeros(2, 3)
    rewards = torch.tensor([1.0, 2.0, 3.0])
    dones = torch.tensor([1.0, 0.0, 0.0])  # a terminal, a timeout (not done), a plain step
    next_v = torch.tensor([10.0, 10.0, 10.0])
    y = torch.tensor([1.0, 2.0 + 0.9 * 10, 3.0 + 0.9 * 10])
    assert torch.equal(td_target(rewards, dones, next_v, 0.9), y)
    assert q_loss(q, y).item() == pytest.approx(y.square().mean().item())


def buffer_and_batch(ds: Dataset, nets: Nets, batch_size: int = 64):
    buf = OfflineBuffer.from_dataset(ds, normalize_obs=True, seed=0)
    return buf, buf.sample(batch_size)


def losses_and_grads(nets: Nets, batch, args, net: str = "value"):
    """Learner.gradients on one batch: the losses {v, q, pi} and the gradients of one net."""
    args.batch_size = len(batch["obs"])
    stats = Learner(nets, args).gradients(batch)
    losses = dict(zip(("v", "q", "pi"), stats[:3]))
    return losses, [p.grad.clone() for p in getattr(nets, net).parameters()]


def perturb(module: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)


def test_value_target_reads_the_target_critic_and_never_the_policy():
    ds = rollout_dataset(steps=200)
    nets = small_nets()
    perturb(nets.q_target, 1)  # target and online critic differ
    _, batch = buffer_and_batch(ds, nets)
    args = Args(dataset="x")
    base, base_grads = losses_and_grads(nets, batch, args)
    for changed in ("policy", "q"):  # neither may move V's loss or gradient
        moved = small_nets()
        moved.q_target.load_state_dict(nets.q_target.state_dict())
        perturb(getattr(moved, changed), 2)
        losses, grads = losses_and_grads(moved, batch, args)
        assert torch.equal(losses["v"], base["v"]), changed
        assert all(torch.equal(a, b) for a, b in zip(grads, base_grads)), changed
    moved = small_nets()
    perturb(moved.q_target, 3)  # another target critic: V's loss and the AWR weights move
    losses, _ = losses_and_grads(moved, batch, args)
    assert not torch.equal(losses["v"], base["v"])
    assert not torch.equal(losses["pi"], base["pi"])
    assert torch.equal(losses["q"], base["q"])  # Q regresses onto r + gamma V(s'), not Q_targ


def test_q_loss_bootstraps_timeouts_through_the_buffer():
    ds = rollout_dataset(steps=200)  # Pendulum: the last row is a timeout, none is terminal
    ds.terminals[50] = True
    nets = small_nets()
    buf = OfflineBuffer.from_dataset(ds, normalize_obs=True)
    rows = buf.data[[50, 199]]  # a terminal, a timeout
    batch = {k: rows[:, c] for k, c in buf._cols.items()}
    args = Args(dataset="x")
    with torch.no_grad():
        next_v = nets.value(batch["next_obs"])
        y = batch["rewards"] + args.gamma * torch.tensor([0.0, 1.0]) * next_v
        expected = (nets.q(batch["obs_actions"]) - y).square().mean()
    assert ds.timeouts[199] and not ds.terminals[199]
    losses, _ = losses_and_grads(nets, batch, args, "q")
    assert losses["q"].item() == pytest.approx(expected.item(), rel=1e-6)


def test_polyak_update_moves_the_target_a_fraction_towards_q():
    ds = rollout_dataset(steps=200)
    nets = small_nets()
    args = Args(dataset="x", polyak=0.05, batch_size=32)
    learner = Learner(nets, args)
    buf = OfflineBuffer.from_dataset(ds, normalize_obs=True)
    old_target = [p.clone() for p in nets.q_target.parameters()]
    old_q = [p.clone() for p in nets.q.parameters()]
    learner.step(buf.sample(32), args.actor_lr)
    for t_old, q_old, t, q in zip(
        old_target, old_q, nets.q_target.parameters(), nets.q.parameters()
    ):
        assert not torch.equal(q, q_old)  # Q took a step
        assert torch.allclose(t, 0.95 * t_old + 0.05 * q, atol=1e-7)


def trained_nets(args: Args, steps: int) -> Nets:
    """small_nets after `steps` Learner steps on fixed minibatches of a Pendulum dataset."""
    nets = small_nets(seed=5)
    learner = Learner(nets, args)
    buf = OfflineBuffer.from_dataset(rollout_dataset(steps=200), normalize_obs=True, seed=2)
    for _ in range(steps):
        learner.step(buf.sample(32), args.actor_lr)
    return nets


def same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


VALUE_LOSS, AWR_LOSS = iql.value_loss, iql.awr_loss
LOSS_EDITS = {  # the edited public loss, the net it trains, and the flags the edit amounts to
    "value_loss": (lambda q_t, v, tau: VALUE_LOSS(q_t, v, 0.9), "value", dict(tau=0.9)),
    "q_loss": (lambda q, y: (q - y).abs().mean(), "q", None),  # L1 instead of the MSE
    "awr_loss": (lambda logp, adv, beta: AWR_LOSS(logp, adv, 2 * beta), "policy", dict(beta=6.0)),
}


@pytest.mark.parametrize("name", list(LOSS_EDITS))
def test_editing_a_loss_function_changes_training(name, monkeypatch):
    # the loss functions are the training signal: after one step an edited loss has moved its
    # own net differently and no other; value_loss and awr_loss edited train, over 3 steps,
    # every net exactly as the flag (tau, beta) that the edit amounts to
    edited_loss, trained, flags = LOSS_EDITS[name]
    args = Args(dataset="x", batch_size=32)
    with monkeypatch.context() as m:
        m.setattr(iql, name, edited_loss)
        edited = [trained_nets(args, steps) for steps in (1, 3)]
    plain = trained_nets(args, 1)
    for net in ("policy", "q", "value"):
        assert same(getattr(edited[0], net), getattr(plain, net)) == (net != trained), net
    if flags is not None:
        flagged = trained_nets(Args(**vars(args) | flags), 3)
        assert all(same(getattr(edited[1], n), getattr(flagged, n)) for n in vars(flagged))
        assert not same(getattr(flagged, trained), getattr(trained_nets(args, 3), trained))


def test_bc_trains_the_same_actor_as_beta_zero_bit_for_bit_and_leaves_the_critics():
    ds = rollout_dataset(steps=200)
    actors, losses = [], []
    for args in (
        Args(dataset="x", bc=True, batch_size=32),
        Args(dataset="x", beta=0.0, batch_size=32),
    ):
        nets = small_nets()
        value_before = [p.clone() for p in nets.value.parameters()]
        learner = Learner(nets, args)
        buf = OfflineBuffer.from_dataset(ds, normalize_obs=True, seed=1)
        for step in range(20):
            learner.step(buf.sample(32), iql.cosine_lr(args.actor_lr, step, 20))
        moved = not all(torch.equal(a, b) for a, b in zip(value_before, nets.value.parameters()))
        assert moved == (not args.bc)
        actors.append([p.clone() for p in nets.policy.parameters()])
        losses.append(learner.pop_stats(20)["train/actor_loss"])  # the logged -mean(log pi)
    assert all(torch.equal(a, b) for a, b in zip(*actors))
    assert losses[0] == losses[1] and losses[0] != 0.0
    assert not torch.equal(actors[0][0], small_nets().policy.net[0].weight)  # it learned


class ReferenceIQL:
    """The IQL update written plainly, as CORL's algorithms/offline/iql.py: separate nn.Linear
    Q heads, torch.distributions.Normal, per-tensor torch.optim.Adam, a per-tensor Polyak
    update; the same initial weights as `nets`. Guards Learner.step's restructured fast path
    (batched Q heads, flat parameters, fused Adam, one backward of the summed losses)."""

    def __init__(self, nets: Nets, args: Args) -> None:
        self.args = args
        twin = [nets.q.head(k) for k in range(2)]
        self.q = torch.nn.ModuleList(twin)
        self.q_target = torch.nn.ModuleList(nets.q_target.head(k) for k in range(2))
        self.value = copy.deepcopy(nets.value.net)
        self.actor = copy.deepcopy(nets.policy.net)
        self.log_std = torch.nn.Parameter(nets.policy.log_std.detach().clone())
        self.max_action = nets.policy.max_action.clone()
        adam = lambda params, lr: torch.optim.Adam(params, lr=lr, eps=1e-8)  # noqa: E731
        self.opt_pi = adam([*self.actor.parameters(), self.log_std], args.actor_lr)
        self.opt_q = adam(self.q.parameters(), args.critic_lr)
        self.opt_v = adam(self.value.parameters(), args.value_lr)

    def step(self, batch: dict, actor_lr: float) -> None:
        a = self.args
        s, act, sa, s2 = batch["obs"], batch["actions"], batch["obs_actions"], batch["next_obs"]
        with torch.no_grad():
            q_t = torch.minimum(*(h(sa).squeeze(-1) for h in self.q_target))
            next_v = self.value(s2).squeeze(-1)
        v = self.value(s).squeeze(-1)
        u = q_t - v
        v_loss = (torch.abs(a.tau - (u < 0).float()) * u**2).mean()
        y = batch["rewards"] + a.gamma * (1 - batch["dones"]) * next_v
        q_loss = sum(torch.nn.functional.mse_loss(h(sa).squeeze(-1), y) for h in self.q) / 2
        w = torch.exp(a.beta * u.detach()).clamp(max=100.0)
        mean = torch.tanh(self.actor(s)) * self.max_action
        std = self.log_std.clamp(-5.0, 2.0).exp()
        logp = torch.distributions.Normal(mean, std).log_prob(act).sum(-1)
        pi_loss = -(w * logp).mean()
        for opt, loss in ((self.opt_v, v_loss), (self.opt_q, q_loss), (self.opt_pi, pi_loss)):
            opt.param_groups[0]["lr"] = actor_lr if opt is self.opt_pi else opt.defaults["lr"]
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for t, q in zip(self.q_target.parameters(), self.q.parameters()):
                t.mul_(1 - a.polyak).add_(a.polyak * q)


def test_learner_step_matches_a_plain_reference_implementation_over_steps():
    # values up to float rounding: other kernels (batched heads, fused Adam) sum in another
    # order; a wrong loss, target, weight clip or optimiser moves them far more than this
    ds = rollout_dataset(steps=300)
    ds.terminals[::5] = True  # some terminals (Pendulum has none): the bootstrap mask counts
    nets = small_nets(seed=7)
    perturb(nets.q_target, 4)  # target and online critic differ from the start
    args = Args(
        dataset="x", beta=10.0, tau=0.8, polyak=0.1, actor_lr=1e-3, critic_lr=2e-3, batch_size=64
    )
    reference = ReferenceIQL(nets, args)
    learner = Learner(nets, args)
    buf = OfflineBuffer.from_dataset(ds, normalize_obs=True, seed=3)
    for step in range(5):
        batch = buf.sample(64)
        lr = iql.cosine_lr(args.actor_lr, step, 5)
        learner.step(batch, lr)
        reference.step(batch, lr)
    close = dict(rtol=1e-4, atol=1e-5)
    for k in range(2):
        for net, ref in ((nets.q, reference.q[k]), (nets.q_target, reference.q_target[k])):
            ref_linear = [m for m in ref if isinstance(m, torch.nn.Linear)]
            for w, b, lin in zip(net.weights, net.biases, ref_linear):
                torch.testing.assert_close(w[k].T, lin.weight, **close)
                torch.testing.assert_close(b[k, 0], lin.bias, **close)
    for mine, ref in ((nets.value.net, reference.value), (nets.policy.net, reference.actor)):
        for p, r in zip(mine.parameters(), ref.parameters()):
            torch.testing.assert_close(p, r, **close)
    torch.testing.assert_close(nets.policy.log_std, reference.log_std, **close)
    moved = small_nets(seed=7).value.net[0].weight
    assert (nets.value.net[0].weight - moved).abs().max() > 1e-3  # the nets did move


def test_reward_scale_uses_complete_trajectories():
    ds = rollout_dataset(steps=450)  # two timed-out episodes of 200 steps, 50 steps unfinished
    returns = [ds.rewards[:200].sum(), ds.rewards[200:400].sum()]
    expected = 1000.0 / (max(returns) - min(returns))
    assert iql.reward_scale(ds) == pytest.approx(expected, rel=1e-5)
    ds.timeouts[:] = False
    ds.timeouts[-1] = True
    with pytest.raises(iql.ArgError, match="--normalize-reward"):
        iql.reward_scale(ds)


def test_cosine_actor_lr():
    assert iql.cosine_lr(1.0, 0, 100) == 1.0
    assert iql.cosine_lr(1.0, 50, 100) == pytest.approx(0.5)
    assert iql.cosine_lr(1.0, 99, 100) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.99)))
    assert iql.cosine_lr(1.0, 100, 100) == 1.0  # the online phase: not decayed


# -- runs ----------------------------------------------------------------------------------


class Killed(Exception):
    """Stands for a kill between two iterations (after that iteration's checkpoint)."""


def kill_after(monkeypatch, iteration: int) -> None:
    end = Session.end_iteration

    def end_then_die(self, it, *a, **kw):
        end(self, it, *a, **kw)
        if it == iteration:
            raise Killed

    monkeypatch.setattr(Session, "end_iteration", end_then_die)


def final_state(run_dir) -> dict:
    return checkpoint.load(Session.checkpoint_path(run_dir))


def test_tiny_run_completes_logs_normalised_scores_and_resumes_bit_for_bit(tmp_path, monkeypatch):
    ds = rollout_dataset()
    full, cut = tmp_path / "full", tmp_path / "cut"
    iql.main(tiny_args(full), ds)
    rows = (full / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert [int(r.split(",")[0]) for r in rows[1:]] == [10, 20, 30, 40, 50, 60]
    evals = [dict(zip(header, r.split(","))) for r in rows[1:] if "nan" not in r.split(",")[-1]]
    assert [int(e["step"]) for e in evals] == [30, 60]
    for e in evals:
        ret = float(e["eval/return"])
        expected = 100 * (ret - REF[0]) / (REF[1] - REF[0])
        assert float(e["eval/normalized_score"]) == pytest.approx(expected)
    final = json.loads((full / "final_eval.json").read_text())
    assert final["step"] == 60 and "eval_normalized_score" in final

    with monkeypatch.context() as m:
        kill_after(m, 3)
        with pytest.raises(Killed):
            iql.main(tiny_args(cut), ds)
    assert final_state(cut)["step"] == 30
    iql.main(parse(Args, ["--resume", str(cut)]), ds)
    a, b = final_state(full), final_state(cut)
    assert a["step"] == b["step"] == 60
    for name in ("policy", "q", "q_target", "value"):
        assert a[name].keys() == b[name].keys()
        assert all(torch.equal(a[name][k], b[name][k]) for k in a[name]), name
    assert torch.equal(a["buffer"]["generator"], b["buffer"]["generator"])
    assert (full / "metrics.csv").read_text() == (cut / "metrics.csv").read_text()


def test_online_steps_add_transitions_and_log_episodes(tmp_path):
    ds = rollout_dataset()
    run = tmp_path / "online"
    iql.main(tiny_args(run, total_timesteps=240, online_steps=220, log_every=20, eval_every=0), ds)
    state = final_state(run)
    online = state["buffer"]["online"]
    assert online.shape[0] == 220  # one env step per online gradient step
    assert not torch.equal(online[0], online[1])
    assert online[:, -1].eq(0).all()  # the episode's time-limit end is stored as no terminal
    rows = [r.split(",") for r in (run / "metrics.csv").read_text().splitlines()]
    col = {k: i for i, k in enumerate(rows[0])}
    episodes = [float(r[col["train/episodes"]]) for r in rows[1:]]
    assert sum(episodes) == 1  # one 200-step Pendulum episode ended in the 220 online steps
    assert float(rows[-1][col["train/actor_lr"]]) == 3e-4  # online: not annealed
    assert float(rows[1][col["train/episodes"]]) == 0  # steps 1..20 are offline


def test_resume_in_the_online_phase_keeps_the_online_rows(tmp_path, monkeypatch):
    ds = rollout_dataset()
    run = tmp_path / "online"
    with monkeypatch.context() as m:
        kill_after(m, 4)  # 80 steps: 40 offline, then 40 online
        with pytest.raises(Killed):
            iql.main(tiny_args(run, total_timesteps=120, online_steps=80, log_every=20), ds)
    assert final_state(run)["buffer"]["online"].shape[0] == 40
    iql.main(parse(Args, ["--resume", str(run)]), ds)
    state = final_state(run)
    assert state["step"] == 120 and state["buffer"]["online"].shape[0] == 80


def test_nan_in_the_data_stops_the_run_with_exit_1(tmp_path, capsys):
    ds = rollout_dataset()
    ds.rewards[:] = np.nan
    with pytest.raises(SystemExit) as exc:
        iql.main(tiny_args(tmp_path / "nan", normalize_reward=False), ds)
    assert exc.value.code == 1
    assert "non-finite" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--tau", "1.0"], "--tau"),
        (["--beta", "-1"], "--beta"),
        (["--polyak", "1.5"], "--polyak"),
        (["--online-steps", "20", "--total-timesteps", "10", "--log-every", "5"], "--online-steps"),
        (["--log-every", "0"], "--log-every"),
        (["--num-envs", "2"], "--num-envs"),
        ([], "--dataset"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(
            Args,
            [
                "--env-id",
                "Pendulum-v1",
                *([] if flag == "--dataset" else ["--dataset", "x"]),
                *argv,
            ],
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}") and len(err.strip().splitlines()) == 1


def test_a_dataset_that_does_not_fit_the_env_exits_2(tmp_path, capsys):
    ds = rollout_dataset(steps=400)
    with pytest.raises(SystemExit) as exc:
        iql.main(tiny_args(tmp_path / "x", env_id="MountainCarContinuous-v0"), ds)
    assert exc.value.code == 2
    assert "--dataset" in capsys.readouterr().err


# -- learning (slow tier) ------------------------------------------------------------------


def medium_replay_dataset(tmp_path, env_id: str, ppo_steps: int, seed: int, every: int = 2):
    """A medium-replay-like dataset: PPO (algos/ppo.py's update, CleanRL defaults) trained for
    ppo_steps; the policy that collected every `every`-th rollout is rolled out again with
    sampled actions for one rollout's length (2048 steps), so the data spans every skill level
    from random to the last policy, as D4RL's replay buffers do. A segment's cut end is a
    timeout. Returns (dataset, mean return of the last snapshot's episodes)."""
    import copy

    from algos import ppo
    from controlrl.nets import ValueNet, make_policy
    from controlrl.training import Run
    from controlrl.update import adam

    args = ppo.Args(
        env_id=env_id,
        total_timesteps=ppo_steps,
        seed=seed,
        run_dir=str(tmp_path / "ppo"),
        eval_every=0,
        eval_episodes=1,
        tensorboard=False,
        progress=False,
    )
    run = Run(args)
    policy = make_policy(run.obs_space, run.act_space, args.hidden_sizes)
    value_net = ValueNet(run.obs_dim, args.hidden_sizes)
    optimizer = adam(policy, value_net, lr=args.learning_rate)
    snapshots = []

    def update(batch):  # the policy that collected this batch, then PPO's update
        snapshots.append((copy.deepcopy(policy), copy.deepcopy(run.obs_normalizer)))
        return ppo.update(policy, value_net, optimizer, batch, args)

    run.train(update, policy, value_net, ratio_eps=args.clip_coef, optimizer=optimizer)
    env = gym.make(env_id)
    low, high = env.action_space.low, env.action_space.high
    rows: dict[str, list] = {k: [] for k in ("o", "a", "r", "n", "term", "trunc")}
    last_returns: list[float] = []
    for k, (snap, norm) in enumerate(snapshots[::every]):
        obs, _ = env.reset(seed=seed * 1000 + k)
        ret = 0.0
        for t in range(args.num_steps):
            x = torch.from_numpy(norm(obs[None].astype(np.float32), update=False))
            with torch.no_grad():
                action = np.clip(snap.sample(x)[0].numpy(), low, high)
            nxt, reward, term, trunc, _ = env.step(action)
            trunc = trunc or t == args.num_steps - 1
            for key, v in zip(rows, (obs, action, reward, nxt, term, trunc)):
                rows[key].append(v)
            ret += reward
            obs = nxt
            if term or trunc:
                if k == len(snapshots[::every]) - 1 and not (trunc and t == args.num_steps - 1):
                    last_returns.append(ret)
                obs, ret = env.reset()[0], 0.0
    f32 = lambda key: np.asarray(rows[key], np.float32)  # noqa: E731
    ds = Dataset(
        f32("o"),
        f32("a"),
        f32("r"),
        f32("n"),
        np.asarray(rows["term"]),
        np.asarray(rows["trunc"]),
        env_id,
    )
    return ds, float(np.mean(last_returns)) if last_returns else float("nan")


def loader():
    """envs.offline's load and write_hdf5."""
    import envs.offline

    if not hasattr(envs.offline, "load") or not hasattr(envs.offline, "write_hdf5"):
        pytest.skip("envs.offline.load / write_hdf5 are not in this tree yet")
    return envs.offline


def iql_cli(*argv: str):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "algos/iql.py", *argv],
        cwd=root,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )


def test_cli_trains_on_a_dataset_file_and_refuses_a_bad_one(tmp_path):
    offline = loader()
    path = offline.write_hdf5(rollout_dataset(), tmp_path / "pendulum-random.hdf5")
    run = tmp_path / "run"
    fast = ["--hidden-sizes", "16", "16", "--batch-size", "16", "--eval-episodes", "1"]
    out = iql_cli("--dataset", str(path), "--total-timesteps", "20", "--log-every", "10",
                  "--run-dir", str(run), "--no-progress", "--no-tensorboard", *fast)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    config = json.loads((run / "config.json").read_text())
    assert config["algo"] == "iql" and config["args"]["env_id"] == "Pendulum-v1"  # the file's
    assert "eval_normalized_score" in json.loads((run / "final_eval.json").read_text())
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(path.read_bytes()[:1000])  # truncated
    out = iql_cli("--dataset", str(bad), "--run-dir", str(tmp_path / "bad_run"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: --dataset") and len(out.stderr.splitlines()) == 1
    assert not (tmp_path / "bad_run").exists()


@pytest.mark.slow
def test_iql_beats_behaviour_cloning_on_a_medium_replay_like_dataset(tmp_path):
    """Hopper-v5, PPO's first 100k steps rolled out again (49k transitions, returns from ~3 to
    ~1000): BC imitates the mixture, IQL's advantage weights pick the better actions. 128-128
    nets (not 256-256) to fit the slow tier; BC plateaus within 5k steps, IQL needs ~30k."""
    ds, _ = medium_replay_dataset(tmp_path, "Hopper-v5", 100_000, seed=1)
    common = dict(
        dataset="<memory>",
        env_id="Hopper-v5",
        hidden_sizes=(128, 128),
        eval_every=0,
        eval_episodes=10,
        tensorboard=False,
        progress=False,
    )
    bc = iql.main(Args(**common, bc=True, total_timesteps=10_000, run_dir=str(tmp_path / "bc")), ds)
    ours = iql.main(Args(**common, total_timesteps=40_000, run_dir=str(tmp_path / "iql")), ds)
    assert ours > 1.25 * bc, (ours, bc)
