"""algos/ppo_brax.py: its JAX loss equals ppo.py's torch loss, its in-graph GAE equals
controlrl.returns.gae with truncation bootstraps, runs reproduce, resume continues, bad flags
fail early. One small env (brax:inverted_pendulum) keeps compiles short."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("brax")

from timeouts import scaled

from algos import ppo  # noqa: E402
from algos import ppo_brax as pb  # noqa: E402
from controlrl.cli import parse  # noqa: E402
from controlrl.losses import clipped_value_loss  # noqa: E402
from controlrl.returns import gae  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "2"]
TINY += ["--episode-length", "10", "--eval-episodes", "2", "--no-progress", "--no-tensorboard"]


def make(argv):
    args = parse(pb.Args, ["--env-id", "brax:inverted_pendulum", *argv])
    from brax import envs as brax_envs

    env = brax_envs.get_environment("inverted_pendulum", backend="spring")
    return args, env, pb.make_functions(env, args)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("unused") / "r"
    # 64 steps with a 10-step limit: truncations, and falls under the random pushes; Brax's
    # swish and a constant reward scale, checked in the rollout below
    argv = [*TINY, "--num-steps", "64", "--episode-length", "10", "--run-dir", str(run_dir)]
    return make([*argv, "--activation", "swish", "--reward-scale", "3", "--no-norm-reward"])


def first_batch(args, env, reset, rollout, seed=5):
    """Fresh parameters (PRNGKey(seed)) and the batch of one rollout from a fresh reset."""
    jax, jnp = pb._jax(), pb._jnp()
    params = pb.init_params(jax.random.PRNGKey(seed), env.observation_size, env.action_size, args)
    obs_rms = pb.rms_init((env.observation_size,))
    state, steps, obs_rms = reset(jax.random.PRNGKey(1), obs_rms)
    z = jnp.zeros(args.num_envs)
    carry = (state, steps, obs_rms, pb.rms_init((1,)), z, z, jnp.zeros(args.num_envs, jnp.int32))
    return params, rollout(params, carry, jax.random.PRNGKey(2))[1]


def reference_update(args, tx, params, batch, key, lr, minibatch_keys=None):
    """optax on the parameter tree, minibatch by minibatch (each epoch's minibatches: a
    permutation of the batch by that epoch's key); minibatch_keys(epoch key) gives one
    "entropy_key" per minibatch. Returns (parameters, per-minibatch losses, the flat batch)."""
    jax, jnp = pb._jax(), pb._jnp()
    size = args.num_envs * args.num_steps
    mb_size = size // args.num_minibatches
    keys = ("obs", "action", "logp", "values", "advantages", "returns")
    data = {k: np.asarray(batch[k]).reshape(size, *batch[k].shape[2:]) for k in keys}
    ref, opt, losses = params, tx.init(params), []
    for key_e in jax.random.split(key, args.update_epochs):
        idx = np.asarray(jax.random.permutation(key_e, size))
        ent_keys = minibatch_keys(key_e) if minibatch_keys else None
        for j in range(args.num_minibatches):
            mb = {k: jnp.asarray(v[idx[j * mb_size : (j + 1) * mb_size]]) for k, v in data.items()}
            if ent_keys is not None:
                mb["entropy_key"] = ent_keys[j]
            grads, stats = jax.grad(pb.loss_fn, has_aux=True)(ref, mb, args)
            step, opt = tx.update(grads, opt)
            ref = jax.tree_util.tree_map(lambda p, u: p - lr * u, ref, step)
            losses.append(float(stats["loss"]))
    return ref, losses, data


def np_mlp(layers, x, activation):
    """The MLP in numpy, independent of pb.mlp: hidden layers activated, the last one linear."""
    act = np.tanh if activation == "tanh" else (lambda h: h / (1 + np.exp(-h)))  # swish
    for i, (w, b) in enumerate(layers):
        x = x @ np.asarray(w) + np.asarray(b)
        x = act(x) if i < len(layers) - 1 else x
    return x


@pytest.mark.parametrize("activation", ["tanh", "swish"])
def test_loss_matches_the_torch_ppo_loss(setup, activation):
    _, env, _ = setup
    args = parse(pb.Args, ["--env-id", "brax:inverted_pendulum", "--activation", activation])
    jax = pb._jax()
    params = pb.init_params(jax.random.PRNGKey(3), env.observation_size, env.action_size, args)
    params["log_std"] = params["log_std"] - 0.3
    rng = np.random.default_rng(0)
    B = 32
    mb = {
        "obs": rng.normal(size=(B, env.observation_size)).astype(np.float32),
        "action": rng.normal(size=(B, env.action_size)).astype(np.float32),
        "logp": rng.normal(-1.0, 0.3, B).astype(np.float32),
        "values": rng.normal(size=B).astype(np.float32),
        "advantages": rng.normal(size=B).astype(np.float32),
        "returns": rng.normal(size=B).astype(np.float32),
    }
    loss, stats = pb.loss_fn(params, {k: pb._jnp().asarray(v) for k, v in mb.items()}, args)

    t = {k: torch.from_numpy(v) for k, v in mb.items()}
    mean = torch.from_numpy(np_mlp(params["actor"], mb["obs"], activation))
    std = torch.from_numpy(np.exp(np.asarray(params["log_std"])))
    dist = torch.distributions.Normal(mean, std)
    logp = dist.log_prob(t["action"]).sum(-1)
    adv = (t["advantages"] - t["advantages"].mean()) / (t["advantages"].std() + 1e-8)
    pg, ref_stats = ppo.ppo_loss(logp, t["logp"], adv, args.clip_coef)
    v_new = torch.from_numpy(np_mlp(params["critic"], mb["obs"], activation)[:, 0])
    v_loss = clipped_value_loss(v_new, t["values"], t["returns"], args.clip_coef, True)
    entropy = dist.entropy().sum(-1).mean()
    expected = pg - args.ent_coef * entropy + args.vf_coef * v_loss
    assert float(loss) == pytest.approx(float(expected), rel=1e-5, abs=1e-6)
    assert float(stats["policy_loss"]) == pytest.approx(float(pg), rel=1e-5, abs=1e-6)
    assert float(stats["value_loss"]) == pytest.approx(float(v_loss), rel=1e-5)
    assert float(stats["entropy"]) == pytest.approx(float(entropy), rel=1e-5)
    assert float(stats["approx_kl"]) == pytest.approx(float(ref_stats["approx_kl"]), abs=1e-6)
    assert float(stats["clip_frac"]) == pytest.approx(float(ref_stats["clip_frac"]))


def test_in_graph_gae_matches_the_numpy_gae_with_truncation_bootstraps(setup):
    args, env, (reset, rollout, _, _, _) = setup
    jax, jnp = pb._jax(), pb._jnp()
    params = pb.init_params(jax.random.PRNGKey(0), env.observation_size, env.action_size, args)
    params["log_std"] = params["log_std"] + 1.0  # wide pushes: some poles fall within the limit
    obs_rms, rew_rms = pb.rms_init((env.observation_size,)), pb.rms_init((1,))
    state, steps, obs_rms = reset(jax.random.PRNGKey(1), obs_rms)
    z = jnp.zeros(args.num_envs)
    carry = (state, steps, obs_rms, rew_rms, z, z, jnp.zeros(args.num_envs, jnp.int32))
    carry, batch = rollout(params, carry, jax.random.PRNGKey(2))
    b = {k: np.asarray(v) for k, v in batch.items()}
    assert b["trunc"].any() and b["term"].any()
    assert not (b["trunc"] & b["term"]).any()
    last = np.asarray(carry[0].obs)
    last = np.clip(
        (last - np.asarray(carry[2]["mean"])) / np.sqrt(np.asarray(carry[2]["var"]) + 1e-8), -10, 10
    )
    v = lambda x: np_mlp(params["critic"], x, "swish")[..., 0]  # noqa: E731
    next_values = np.concatenate([b["values"][1:], v(last)[None]])
    next_values = np.where(b["trunc"], v(b["final_obs"]), next_values)
    expected = gae(
        b["reward"], b["values"], next_values, b["term"], b["ended"], args.gamma, args.gae_lambda
    )
    np.testing.assert_allclose(b["advantages"], expected, rtol=1e-4, atol=1e-5)
    # the policy acted with swish: the stored means and log-probs are the swish actor's
    mean = np_mlp(params["actor"], b["obs"], "swish")
    np.testing.assert_allclose(b["mean"], mean, rtol=1e-4, atol=1e-5)
    logp = np.asarray(pb.policy_log_prob("gaussian", params, mean, b["action"]))
    np.testing.assert_allclose(b["logp"], logp, rtol=1e-4, atol=1e-4)
    # the pendulum pays 1 per step: GAE sees 3 (--reward-scale 3), the logged returns stay raw
    np.testing.assert_allclose(b["reward"], 3.0)
    assert b["episodes"] == b["ended"].sum() > 0
    assert b["episode_return_sum"] == b["episode_length_sum"] > 0
    # a truncated step bootstraps from its own final observation, not the next episode's first
    t, n = map(int, np.argwhere(b["trunc"])[0])
    assert not np.allclose(
        b["final_obs"][t, n], b["obs"][t + 1, n] if t + 1 < len(b["obs"]) else last[n]
    )


def test_update_matches_plain_adam_steps_on_the_parameter_tree(setup):
    """The flat-vector update equals optax on the parameter tree, minibatch by minibatch (the
    minibatches of each epoch: a permutation of the batch by that epoch's key), and its
    diagnostics equal controlrl's."""
    from controlrl.diagnostics import explained_variance

    args, env, (reset, rollout, update, _, tx) = setup
    jax = pb._jax()
    params, batch = first_batch(args, env, reset, rollout, seed=5)
    key, lr = jax.random.PRNGKey(7), 1e-2
    new, _, out = update(params, pb.init_optimizer(tx, params), batch, key, lr)
    ref, losses, data = reference_update(args, tx, params, batch, key, lr)
    for a, b in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    assert float(out["loss"]) == pytest.approx(np.mean(losses), rel=1e-4)
    # diagnostics over the whole batch (controlrl.diagnostics): KL(old || new) per state
    old_mean = np_mlp(params["actor"], data["obs"], "swish")
    new_mean = np_mlp(new["actor"], data["obs"], "swish")
    lo, ln = np.asarray(params["log_std"]), np.asarray(new["log_std"])
    kl = ln - lo + (np.exp(2 * lo) + (old_mean - new_mean) ** 2) / (2 * np.exp(2 * ln)) - 0.5
    assert float(out["kl_mean"]) == pytest.approx(kl.sum(-1).mean(), rel=1e-3)
    assert float(out["kl_mean"]) > 0
    ev = explained_variance(data["values"], data["returns"])
    assert float(out["explained_variance"]) == pytest.approx(ev, rel=1e-4, abs=1e-5)
    assert bool(out["finite"]) and int(out["episodes"]) == int(batch["episodes"])


def run(*argv, check=True):
    out = subprocess.run(
        [sys.executable, "algos/ppo_brax.py", "--env-id", "brax:inverted_pendulum", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    if check:
        assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_same_seed_same_metrics_and_resume(tmp_path):
    b, c = tmp_path / "b", tmp_path / "c"
    run(*TINY, "--total-timesteps", "128", "--checkpoint-every", "1", "--run-dir", str(c))
    # b: the same run as a kill before its first checkpoint leaves it (config.json and rows, no
    # checkpoint); --resume runs it again from step 0, dropping the rows, in a second process
    b.mkdir()
    for name in ("config.json", "metrics.csv", "timing.csv"):
        (b / name).write_bytes((c / name).read_bytes())
    run("--resume", str(b))
    assert (c / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()
    steps = [int(line.split(",")[0]) for line in (b / "metrics.csv").read_text().split()[1:]]
    assert steps == [64, 128]
    assert math.isfinite(json.loads((b / "final_eval.json").read_text())["eval_return_mean"])
    # resume: the 2-iteration run c extended to 4 continues at step 192 with its statistics
    config = json.loads((c / "config.json").read_text())
    config["args"]["total_timesteps"] = 256
    (c / "config.json").write_text(json.dumps(config))
    killed = torch.load(c / "checkpoints" / "latest.pt", weights_only=True)
    run("--resume", str(c))
    steps = [int(line.split(",")[0]) for line in (c / "metrics.csv").read_text().split()[1:]]
    assert steps == [64, 128, 192, 256]
    ckpt = torch.load(c / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["step"] == 256 and ckpt["iteration"] == 4
    # the normalisers continued with the envs put back mid-episode (the checkpoint's carry), as
    # README's resume section says: no env restarts, so one observation and one return per env
    # step after the checkpoint, and nothing else
    count = lambda state, name: float(next(t for t in state["jax"][name] if t.dim() == 0))  # noqa: E731
    steps_after = 256 - killed["step"]
    expected = count(killed, "obs_rms") + steps_after
    assert abs(count(ckpt, "obs_rms") - expected) < 0.5
    assert abs(count(ckpt, "rew_rms") - (count(killed, "rew_rms") + steps_after)) < 0.5


@pytest.mark.slow  # two processes and a vmapped compile: ~30 s
def test_population_seed_k_follows_its_single_run_within_float_rounding(tmp_path):
    """--num-seeds 2 --seed 1 against --seed 2 alone (the TINY shapes of the test above, so the
    single run's compile is shared): the same keys (evaluations between iterations draw some), so
    the same episodes; every logged number of seed 2 within float rounding of the single run's
    (the batched matmuls may round otherwise)."""
    import csv

    pop, one = tmp_path / "pop", tmp_path / "one"
    argv = [*TINY, "--total-timesteps", "192", "--eval-every", "64"]  # keys drawn between
    run(*argv, "--num-seeds", "2", "--run-dir", str(pop))
    run(*argv, "--seed", "2", "--run-dir", str(one))
    with (pop / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f)]
    with (one / "metrics.csv").open() as f:
        single = list(csv.DictReader(f))
    assert [r["seed"] for r in rows] == ["1", "2"] * 3
    mine = [r for r in rows if r["seed"] == "2"]
    for a, b in zip(mine, single, strict=True):
        assert a["step"] == b["step"] and a["train/episodes"] == b["train/episodes"]
        for name in b:
            x, y = float(a[name]), float(b[name])
            assert (
                x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-4 * (1 + abs(y))
            ), (name, x, y)
    final = json.loads((pop / "final_eval.json").read_text())
    assert final["seeds"] == [1, 2] and len(final["eval_return_per_seed"]) == 2
    alone = json.loads((one / "final_eval.json").read_text())["eval_return_mean"]
    assert abs(final["eval_return_per_seed"][1] - alone) <= 1e-3 * (1 + abs(alone))
    assert (pop / "aggregate.csv").exists()


def test_bad_flags_fail_before_anything_starts(tmp_path, capsys):
    """The script exits 2 on a bad flag before it makes the run dir (one process); every other
    flag check is the same parse, run in this process (a process per flag costs seconds)."""
    out = run("--env-id", "Hopper-v5", "--run-dir", str(tmp_path / "x"), check=False)
    assert out.returncode == 2 and "--env-id must be a brax: id" in out.stderr
    assert not (tmp_path / "x").exists()
    for argv, fragment in [
        (["--target-kl", "0.01"], "--target-kl is not supported"),
        (["--episode-length", "0"], "--episode-length must be > 0"),
        (["--activation", "relu"], "--activation must be one of tanh, swish, got relu"),
        (["--reward-scale", "0"], "--reward-scale must be > 0"),
        (["--adam-eps", "-1e-8"], "--adam-eps must be > 0"),
        (["--policy", "beta"], "--policy must be one of gaussian, tanh_normal, got beta"),
    ]:
        with pytest.raises(SystemExit) as exc:
            parse(pb.Args, ["--env-id", "brax:inverted_pendulum", *argv])
        assert exc.value.code == 2 and fragment in capsys.readouterr().err, argv


def test_no_clip_grad_is_plain_adam_and_adam_eps_is_used():
    import optax

    jnp = pb._jnp()
    base = ["--env-id", "brax:inverted_pendulum", "--max-grad-norm", "0.5"]
    grads = [{"w": jnp.array([30.0, -40.0])}, {"w": jnp.array([1e-3, 2e-3])}]

    def updates(tx):
        state, out = tx.init(grads[0]), []
        for g in grads:
            u, state = tx.update(g, state)
            out.append(np.asarray(u["w"]))
        return np.stack(out)

    clipped = updates(pb.make_optimizer(parse(pb.Args, base)))
    plain = updates(pb.make_optimizer(parse(pb.Args, [*base, "--no-clip-grad", "--adam-eps", "1"])))
    np.testing.assert_allclose(plain, updates(optax.scale_by_adam(eps=1.0)), rtol=1e-6)
    ref = optax.chain(optax.clip_by_global_norm(0.5), optax.scale_by_adam(eps=1e-5))
    np.testing.assert_allclose(clipped, updates(ref), rtol=1e-6)
    assert not np.allclose(plain, clipped, rtol=1e-3)


def test_in_graph_normalisers_match_controlrl_normalize():
    from controlrl.normalize import ObsNormalizer, RewardScaler

    rng = np.random.default_rng(0)
    ours, ref = pb.rms_init((3,)), ObsNormalizer((3,))
    rew, ref_rew = pb.rms_init((1,)), RewardScaler(4, gamma=0.9)
    ret = np.zeros(4)
    for _ in range(20):
        x = rng.normal(2.0, 3.0, (4, 3)).astype(np.float32)
        ours = pb.rms_update(ours, pb._jnp().asarray(x))
        np.testing.assert_allclose(pb.normalize(ours, x), ref(x), rtol=1e-4, atol=1e-4)
        r, ended = rng.normal(size=4), rng.random(4) < 0.2
        ret = ret * 0.9 + r
        rew = pb.rms_update(rew, pb._jnp().asarray(ret[:, None], np.float32))
        ret[ended] = 0.0
        scaled = np.clip(r / np.sqrt(float(rew["var"][0]) + 1e-8), -10, 10)
        np.testing.assert_allclose(scaled, ref_rew(r, ended), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_mjx_pipeline_trains_a_tiny_case_to_its_end(tmp_path):
    """--brax-pipeline mjx runs (no deadlock on the pinned jaxlib, envs/brax.py's guard lets
    it through); what takes long is its compile (about a minute cold, seconds from the JAX
    cache that every run on the machine shares)."""
    d = tmp_path / "mjx"
    run(*TINY, "--brax-pipeline", "mjx", "--total-timesteps", "128", "--run-dir", str(d))
    steps = [int(line.split(",")[0]) for line in (d / "metrics.csv").read_text().split()[1:]]
    assert steps == [64, 128]
    assert json.loads((d / "config.json").read_text())["args"]["brax_pipeline"] == "mjx"
    assert math.isfinite(json.loads((d / "final_eval.json").read_text())["eval_return_mean"])
