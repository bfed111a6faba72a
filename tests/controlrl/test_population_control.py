"""ppo.py --num-seeds on control ids (controlrl/population_control.py): seed k of a population
samples the actions of `--seed k` alone over the first rollout and holds its parameters up to
float rounding after the first update (Gymnasium MuJoCo and EnvPool); S = 1 is the single run
to the byte; one seed's learning rate leaves the others' bits alone; a population stopped at a
checkpoint and resumed ends as the uninterrupted one, bit for bit."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from population_rows import assert_only_seed_zero_moved, rows, without_seed
from timeouts import scaled

from algos import ppo
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.population_actor_critic import PopulationCritic

QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "1"]
# 2 rollouts of 64 steps, 4 minibatches, 2 epochs: an update that reads shuffles, advantage
# normalisation, the clip and the annealed learning rate
TINY = ["--num-steps", "64", "--num-minibatches", "4", "--update-epochs", "2"]
TINY += ["--total-timesteps", "256", "--hidden-sizes", "16", "16"]


def train(run_dir, *argv):
    ppo.main(parse(ppo.Args, [*TINY, *QUIET, *argv, "--run-dir", str(run_dir)]))


def flat_params(state: dict, k: int | None) -> torch.Tensor:
    """A checkpoint's actor and critic as one vector (k: seed k's row of a population's)."""
    if k is None:
        merged = {**state["policy"], **{f"critic.{n}": v for n, v in state["value"].items()}}
        return torch.cat([v.reshape(-1) for v in merged.values()])
    return torch.cat([v[k].reshape(-1) for v in state["policy"].values()])


@pytest.mark.parametrize(
    "env_id, num_envs",
    [
        ("Hopper-v5", 1),
        ("Pendulum-v1", 2),
        ("CartPole-v1", 1),
        ("envpool:Hopper-v5", 1),
        ("envpool:Hopper-v5", 2),
    ],
)
def test_seed_k_of_a_population_is_seed_k_alone(env_id, num_envs, tmp_path, recorded_actions):
    if env_id.startswith("envpool:"):
        pytest.importorskip("envpool")
    S, k, N = 3, 1, num_envs
    argv = ["--env-id", env_id, "--num-envs", str(N), "--checkpoint-every", "1"]
    argv += ["--keep-checkpoints"]
    if env_id == "Pendulum-v1":  # every episode truncated at step 200 of the first rollout:
        argv += ["--num-steps", "256", "--total-timesteps", "512"]  # V(final obs) bootstraps
    train(tmp_path / "pop", *argv, "--seed", "4", "--num-seeds", str(S))
    pop_actions = list(recorded_actions)
    recorded_actions.clear()
    train(tmp_path / "single", *argv, "--seed", str(4 + k))
    # the first rollout: the same init, noise stream, env seeds, normaliser and forward. One
    # env per seed: the same actions to the bit. More: within float rounding, not bits, since
    # MKL's kernel for a 2-row matmul rounds by the input's memory alignment (the single run's
    # own rows differ by where they sit in its buffer); measured: at most 1.2e-7 apart
    mine = pop_actions[0][:, k * N : (k + 1) * N]
    if N == 1:
        np.testing.assert_array_equal(mine, recorded_actions[0])
    else:
        np.testing.assert_allclose(mine, recorded_actions[0], rtol=0, atol=1e-6)
    first = sorted((tmp_path / "single" / "checkpoints").glob("step_*.pt"))[0]
    mine = flat_params(checkpoint.load(tmp_path / "pop" / "checkpoints" / first.name), k)
    alone = flat_params(checkpoint.load(first), None)
    err = float((mine - alone).abs().max() / alone.abs().max())
    assert err <= 1e-5, err  # after the first update: float rounding of batched reductions
    header, mine_rows = rows(tmp_path / "pop" / "metrics.csv", seed=4 + k)
    _, alone_rows = rows(tmp_path / "single" / "metrics.csv")
    col = header.index("train/episode_length")  # the same actions: the same episodes
    assert mine_rows[0][col] == alone_rows[0][col]


@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1", "Pendulum-v1"])
def test_one_seed_population_is_the_single_run_to_the_byte(env_id, tmp_path):
    argv = ["--env-id", env_id, "--seed", "3", "--eval-every", "128"]
    train(tmp_path / "single", *argv)
    train(tmp_path / "pop", *argv, "--num-seeds", "1")
    single = (tmp_path / "single" / "metrics.csv").read_text()
    evals = [line.rsplit(",", 1)[1] for line in single.splitlines()[1:]]
    assert len(evals) >= 2 and "nan" not in evals[1::2]  # evaluations every other row
    assert without_seed(tmp_path / "pop" / "metrics.csv") == single
    final = [json.loads((tmp_path / d / "final_eval.json").read_text()) for d in ("single", "pop")]
    assert final[1]["eval_return_per_seed"] == [final[0]["eval_return_mean"]]
    a, b = (checkpoint.load(tmp_path / d / "checkpoints" / "latest.pt") for d in ("single", "pop"))
    assert torch.equal(flat_params(a, None), flat_params(b, 0))


def test_a_seed_does_not_depend_on_the_other_seeds(tmp_path, monkeypatch):
    argv = ["--env-id", "Hopper-v5", "--seed", "0", "--num-seeds", "3", "--no-anneal-lr"]
    train(tmp_path / "a", *argv)
    from controlrl import population_actor_critic as population

    adam = population.adam

    def perturbed(policy, lr):
        optimizer = adam(policy, lr=lr)
        optimizer.lrs[0] = 10 * lr  # seed 0 alone learns faster
        return optimizer

    monkeypatch.setattr(population, "adam", perturbed)
    train(tmp_path / "b", *argv)
    assert_only_seed_zero_moved(tmp_path / "a", tmp_path / "b")


def test_a_resumed_population_ends_as_the_uninterrupted_one(tmp_path):
    """Stopped after iteration 2 of 4 (its checkpoint kept, the rest of the run directory as it
    was then), resumed: the same metrics.csv, aggregate.csv and final parameters, bit for bit;
    the envs continue mid-episode."""
    argv = ["--env-id", "Hopper-v5", "--seed", "2", "--num-seeds", "2", "--checkpoint-every"]
    argv += ["2", "--keep-checkpoints"]
    a, b = tmp_path / "a", tmp_path / "b"
    train(a, *argv)
    (b / "checkpoints").mkdir(parents=True)
    for part in ("config.json", "metrics.csv", "aggregate.csv"):
        (b / part).write_bytes((a / part).read_bytes())
    kept = sorted((a / "checkpoints").glob("step_*.pt"))[0]
    assert kept.name == "step_000000128.pt"
    (b / "checkpoints" / "latest.pt").write_bytes(kept.read_bytes())
    ppo.main(parse(ppo.Args, ["--resume", str(b)]))
    for part in ("metrics.csv", "aggregate.csv", "final_eval.json"):
        assert (a / part).read_text() == (b / part).read_text(), part
    pa, pb = (checkpoint.load(d / "checkpoints" / "latest.pt") for d in (a, b))
    for name in pa["policy"]:
        assert torch.equal(pa["policy"][name], pb["policy"][name])


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--env-id", "brax:ant"], "--num-seeds needs a bandit:, Gymnasium or envpool: env id"),
        (["--env-id", "Hopper-v5", "--num-seeds", "0"], "--num-seeds must be >= 1, got 0"),
        (["--env-id", "Hopper-v5", "--num-seeds", "100000000"], "--num-seeds 100000000: about"),
        (["--env-id", "Hopper-v5", "--ratio", "kalman"], "--num-seeds needs --ratio step"),
    ],
)
def test_bad_population_flags_exit_2_before_the_run_directory(argv, fragment, capsys, tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        parse(ppo.Args, ["--num-seeds", "4", *argv, "--run-dir", str(run_dir)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not run_dir.exists()


def test_a_population_killed_mid_run_resumes_to_the_uninterrupted_one(tmp_path):
    """SIGKILL after its second checkpoint, then --resume: the same rows, bit for bit."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    argv = [*TINY, *QUIET, "--env-id", "Hopper-v5", "--seed", "1", "--num-seeds", "2"]
    argv += ["--num-steps", "256", "--total-timesteps", "2560", "--checkpoint-every", "2"]
    argv += ["--keep-checkpoints"]
    script = [sys.executable, str(root / "algos" / "ppo.py")]
    a, b = tmp_path / "a", tmp_path / "b"
    subprocess.run([*script, *argv, "--run-dir", str(a)], cwd=root, check=True, timeout=scaled(600))
    proc = subprocess.Popen([*script, *argv, "--run-dir", str(b)], cwd=root)
    deadline = time.monotonic() + 600
    while len(list((b / "checkpoints").glob("step_*.pt"))) < 2 and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (b / "final_eval.json").exists()  # killed mid-run
    resumed = subprocess.run([*script, "--resume", str(b)], cwd=root, timeout=scaled(600))
    assert resumed.returncode == 0
    for part in ("metrics.csv", "aggregate.csv", "final_eval.json"):
        assert (a / part).read_text() == (b / part).read_text(), part


@pytest.mark.parametrize(
    "discrete, hidden", [(False, (64, 64)), (True, (64, 64)), (False, (256, 128))]
)
def test_the_batched_loss_networks_give_vmaps_losses_and_gradients_to_the_bit(discrete, hidden):
    """ControlPopulationPolicy runs the actor and ValueNet of the vmapped loss as batched
    matmuls on the stacked parameters: the same losses, statistics and gradient rows as
    PopulationPolicy's vmap over functional_call, without a functional_call of either."""
    import gymnasium as gym

    from algos.ppo import ppo_loss
    from controlrl.nets import ValueNet, make_policy
    from controlrl.population import PopulationPolicy
    from controlrl.population_control import ControlPopulationPolicy
    from controlrl.update import actor_critic_loss

    S, B, d = 4, 64, 11
    obs_space = gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)
    act_space = gym.spaces.Discrete(5) if discrete else gym.spaces.Box(-1, 1, (3,), np.float32)
    models = []
    for k in range(S):
        torch.manual_seed(k)
        policy = make_policy(obs_space, act_space, hidden)
        policy.critic = ValueNet(d, hidden)
        with torch.no_grad():  # non-zero biases (initialised at 0): where a bias enters counts
            for param in policy.parameters():
                param.add_(0.1 * torch.randn(param.shape))
        models.append(policy)
    g = torch.Generator().manual_seed(0)
    actions = torch.randint(0, 5, (S, B), generator=g) if discrete else torch.randn(S, B, 3)
    mb = {"obs": torch.randn(S, B, d, generator=g), "actions": actions}
    for name in ("logprobs", "advantages", "values", "returns"):
        mb[name] = torch.randn(S, B, generator=g)
    args = parse(ppo.Args, ["--env-id", "Hopper-v5", "--ent-coef", "0.01"])
    out = []
    for cls in (PopulationPolicy, ControlPopulationPolicy):
        pop = cls.build([copy.deepcopy(m) for m in models])
        if cls is ControlPopulationPolicy:  # the actor and critic never through vmap's call

            def refuse(params, name, *args):
                raise AssertionError(f"functional_call of {name}")

            pop._seed_call = refuse
        critic = PopulationCritic(pop)
        loss_fn = actor_critic_loss(pop, critic, lambda *a: ppo_loss(*a, 0.2), 0.2, args)
        loss, stats = pop.bound_losses(loss_fn, mb, torch.arange(B).expand(S, B))
        pop.backward(loss.sum())
        out.append((loss, stats, pop.flat.grad.clone()))
    (loss_v, stats_v, grad_v), (loss_b, stats_b, grad_b) = out
    assert torch.equal(loss_v, loss_b)
    assert stats_v.keys() == stats_b.keys()
    assert all(torch.equal(stats_v[k], stats_b[k]) for k in stats_v)
    assert grad_v.abs().amax(1).gt(0).all() and torch.equal(grad_v, grad_b)


def test_a_minibatch_gathers_each_seeds_rows():
    from controlrl.population_update import _gather_minibatch

    g = torch.Generator().manual_seed(0)
    batch = {"obs": torch.randn(3, 10, 4, generator=g), "advantages": torch.randn(3, 10)}
    idx = torch.stack([torch.randperm(10, generator=g)[:6] for _ in range(3)])
    mb = _gather_minibatch(batch, idx)
    for name, x in batch.items():
        want = torch.stack([x[k, idx[k]] for k in range(3)])
        assert mb[name].shape == want.shape and torch.equal(mb[name], want), name


@pytest.mark.parametrize("num_envs, act_dim", [(1, 6), (2, 3), (1, 1), (4, 4)])
def test_a_rollouts_noise_drawn_up_front_is_the_per_step_noise(num_envs, act_dim):
    """draw_rollout_noise takes, for each seed, the numbers its per-step draws would take from
    its generator (and leaves the generator where they would); 16 or more elements a step
    (torch's vectorised normal_): not drawn up front."""
    import gymnasium as gym

    from controlrl.nets import make_policy
    from controlrl.population import PopulationPolicy
    from controlrl.population_control import ControlPopulationPolicy

    S, T = 3, 7
    obs_space = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
    act_space = gym.spaces.Box(-1, 1, (act_dim,), np.float32)
    models = [make_policy(obs_space, act_space, (8,)) for _ in range(S)]
    pops = [cls.build(models) for cls in (PopulationPolicy, ControlPopulationPolicy)]
    for pop in pops:
        pop.generators = [torch.Generator().manual_seed(10 + k) for k in range(S)]
    per_step, up_front = pops
    shape = (S, num_envs, act_dim)
    drawn = up_front.draw_rollout_noise(T, num_envs)
    assert drawn == (num_envs * act_dim < 16)
    for _ in range(T):
        want = per_step.noise(shape, torch.float32)
        assert torch.equal(up_front.noise(shape, torch.float32), want)
    up_front.end_rollout_noise()
    for a, b in zip(per_step.generators, up_front.generators):
        assert torch.equal(a.get_state(), b.get_state())
