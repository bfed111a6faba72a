"""The objectives algos/grpo.py assembles from controlrl/objective.py's parts, through the
script: scores shaped before the advantage (DAPO's overlong punishment, the KL in the reward),
every policy loss in a run, a population of a new objective equal to its single runs, and the
flags' refusals (exit 2, one line naming the flag)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algos import grpo
from controlrl import checkpoint
from controlrl.cli import parse
from controlrl.group import group_advantages
from controlrl.group_rollout import GroupRollout
from controlrl.nets import CategoricalPolicy
from controlrl.objective import POLICY_LOSSES, Tokens, k3, overlong_penalty

torch.set_num_threads(1)
QUIET = ["--no-tensorboard", "--no-progress", "--eval-every", "0", "--eval-episodes", "2"]
SMALL = ["--hidden-sizes", "8", "--num-envs", "16", "--group-size", "4"]


def rollout_of(policy, lengths, returns, group_size: int) -> GroupRollout:
    """A rollout of len(lengths) envs whose episodes have these lengths and returns."""
    gen = torch.Generator().manual_seed(0)
    T, N = max(lengths), len(lengths)
    obs = torch.randn(T, N, 3, generator=gen).numpy()
    with torch.no_grad():
        actions = policy.sample(torch.from_numpy(obs).reshape(T * N, -1)).numpy()
    valid = np.arange(T)[:, None] < np.asarray(lengths)[None]
    return GroupRollout(
        obs=obs,
        actions=actions.reshape(T, N),
        valid=valid,
        ended=~valid | (np.arange(T)[:, None] == np.asarray(lengths)[None] - 1),
        returns=np.asarray(returns, np.float64),
        lengths=np.asarray(lengths),
        group_size=group_size,
    )


def batch_of(rollout, policy, ref, **flags):
    args = grpo.Args(num_envs=8, group_size=4, **flags)
    old_logp, _, _ = rollout.log_probs(policy)
    batch, _, _ = grpo.grpo_batch(rollout, old_logp, ref, args)
    return batch, old_logp


def first_step_advantages(batch, T: int, N: int) -> torch.Tensor:
    return batch["advantages"].reshape(T, N)[0].double()


def test_overlong_punishment_enters_the_scores_before_the_group_advantage():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    lengths, returns = [2, 5, 6, 8, 3, 7, 4, 1], [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    rollout = rollout_of(policy, lengths, returns, 4)
    flags = {"overlong_max": 7, "overlong_cache": 3, "kl_coef": 0.0}
    batch, _ = batch_of(rollout, policy, policy, **flags)
    shaped = torch.tensor(returns).double() + overlong_penalty(torch.tensor(lengths), 7, 3)
    want = group_advantages(shaped.reshape(2, 4)).reshape(-1).float().double()
    torch.testing.assert_close(first_step_advantages(batch, 8, 8), want, rtol=0, atol=0)
    assert shaped.tolist()[3] == 0.0 and shaped.tolist()[2] == pytest.approx(-2 / 3)


def test_kl_in_the_reward_is_taken_off_each_episodes_score():
    torch.manual_seed(0)
    policy, ref = CategoricalPolicy(3, 4, (8,)), CategoricalPolicy(3, 4, (8,))
    lengths, returns = [2, 3, 3, 1, 3, 2, 1, 3], [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    rollout = rollout_of(policy, lengths, returns, 4)
    batch, old_logp = batch_of(rollout, policy, ref, kl_coef=0.3, kl_in="reward")
    ref_logp = batch["ref_logprobs"].reshape(old_logp.shape)
    valid = torch.from_numpy(rollout.valid)
    kl = torch.where(valid, k3(old_logp, ref_logp), 0.0).sum(0).double()
    shaped = torch.tensor(returns).double() - 0.3 * kl
    want = group_advantages(shaped.reshape(2, 4)).reshape(-1).float().double()
    torch.testing.assert_close(first_step_advantages(batch, 3, 8), want, rtol=0, atol=0)
    assert float(kl.min()) > 0


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_every_policy_loss_trains_a_sequence_bandit(name, tmp_path):
    argv = ["--env-id", "bandit:sequence-reverse-2-3", "--total-timesteps", "96"]
    argv += ["--policy-loss", name, "--eps-high", "0.28", "--cov-frac", "0.1"]
    grpo.main(parse(grpo.Args, [*argv, *SMALL, *QUIET, "--run-dir", str(tmp_path / name)]))
    header, *rows = (tmp_path / name / "metrics.csv").read_text().splitlines()
    cols = header.split(",")
    assert len(rows) == 2
    last = dict(zip(cols, rows[-1].split(",")))
    assert int(last["train/grad_steps"]) == 4 and np.isfinite(float(last["train/loss"]))
    assert float(last["train/kl_mean"]) > 0  # the update moved the policy


@pytest.mark.parametrize(
    "flags",
    [
        ["--policy-loss", "clip-cov", "--cov-frac", "0.2", "--clip-cov-lb", "-1"],  # noise
        ["--policy-loss", "sapo", "--kl-in", "reward", "--eps-high", "0.28"],
        ["--inject-demos", "--inject-threshold", "0.9"],  # HAPO's gate: per-seed draws, counts
    ],
)
def test_population_of_two_equals_the_single_runs(flags, tmp_path, recorded_actions):
    """Seeds 4 and 5 of one population sample the actions of the runs --seed 4 and --seed 5
    and reach their parameters (to float rounding: vmap's batched matmuls): the same loss
    functions, nothing of the objective written twice."""
    argv = ["--env-id", "bandit:contextual-4-5", "--total-timesteps", "48", *flags]
    keep = ["--checkpoint-every", "1", "--keep-checkpoints"]

    def run(name, *extra):
        run_dir = ["--run-dir", str(tmp_path / name)]
        grpo.main(parse(grpo.Args, [*argv, *keep, *SMALL, *QUIET, *run_dir, *extra]))

    run("pop", "--seed", "4", "--num-seeds", "2")
    pop_actions = list(recorded_actions)
    for k in range(2):
        recorded_actions.clear()
        run(f"s{k}", "--seed", str(4 + k))
        assert len(recorded_actions) == len(pop_actions) == 3
        for a, b in zip(pop_actions, recorded_actions):
            np.testing.assert_array_equal(a[:, k * 16 : (k + 1) * 16], b)
        for path in sorted((tmp_path / f"s{k}" / "checkpoints").glob("step_*.pt")):
            mine = checkpoint.load(tmp_path / "pop" / "checkpoints" / path.name)["policy"]
            alone = checkpoint.load(path)["policy"]
            a = torch.cat([mine[n][k].reshape(-1) for n in alone])
            b = torch.cat([v.reshape(-1) for v in alone.values()])
            assert float((a - b).abs().max() / b.abs().max()) <= 1e-5, path.name


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--eps-low", "0.3", "--eps-high", "0.2"], "--eps-high must be >= --eps-low (0.3)"),
        (["--eps-high", "0.1"], "--eps-high must be >= --eps-low (0.2), got 0.1"),
        (["--eps-low", "0"], "--eps-low must be > 0"),
        (["--sapo-tau-pos", "0"], "--sapo-tau-pos must be > 0"),
        (["--sapo-tau-neg", "-1"], "--sapo-tau-neg must be > 0"),
        (["--dpg-eta", "0"], "--dpg-eta must be > 0"),
        (["--gbpo-temperature", "0"], "--gbpo-temperature must be > 0"),
        (["--policy-loss", "nft", "--adv-norm", "rloo"], "--policy-loss nft weighs prompts as"),
        (["--policy-loss", "nft", "--overlong-max", "4"], "--policy-loss nft needs successes"),
        (["--policy-loss", "ppo2"], "--policy-loss must be one of cispo, clip, clip-cov"),
        (
            ["--adv-norm", "rlo"],
            "--adv-norm must be one of batch-mean, bnpo, gpg, lite-ppo, mean, mean-std",
        ),
        (["--kl-estimator", "k9"], "--kl-estimator must be one of k1, k2, k3, k3-unbiased"),
        (["--kl-in", "value"], "--kl-in must be one of loss, reward, got 'value'"),
        (["--cov-frac", "0"], "--cov-frac must be in (0, 1]"),
        (["--clip-cov-ub", "0.5"], "--clip-cov-ub must be > --clip-cov-lb (1.0)"),
        (["--overlong-max", "4", "--overlong-cache", "5"], "--overlong-cache must be <="),
        (["--overlong-max", "0"], "--overlong-max must be > 0"),
    ],
)
def test_bad_objective_flags_exit_2_with_one_line(argv, fragment, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        parse(grpo.Args, ["--env-id", "bandit:bernoulli-10", *argv, "--run-dir", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and fragment in err, err


def test_flags_build_the_objective_and_the_logged_clip_range():
    args = grpo.Args(eps_high=0.28, policy_loss="cispo", sapo_tau_neg=2.0)
    o = grpo.objective_of(args)
    assert (o.policy_loss, o.eps_low, o.eps_high, o.sapo_tau_neg) == ("cispo", 0.2, 0.28, 2.0)
    assert (o.kl, o.kl_coef, o.kl_in) == ("k3", 0.04, "loss")
    assert grpo.clip_range(args) == (0.2, 0.28)  # run.train's ratio_eps: ratio_dev_frac's range
    assert grpo.clip_range(grpo.Args(clip_coef=0.1)) == (0.1, 0.1)


def test_negatives_off_reaches_the_batch():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    returns = [1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0]
    rollout = rollout_of(policy, [1] * 8, returns, 4)
    batch, _ = batch_of(rollout, policy, policy, drop_negatives=True)
    want = group_advantages(torch.tensor(returns).double().reshape(2, 4)).clamp_min(0)
    torch.testing.assert_close(batch["advantages"].double(), want.reshape(-1).float().double())


@pytest.mark.parametrize("population", [False, True])
def test_a_behaviour_sampler_draws_the_rollout_and_no_ratio_range_logs_no_dev_frac(
    population, tmp_path
):
    """run.train(..., sample=...) collects with that sampler; ratio_eps None (the default)
    leaves ratio_dev_frac out of metrics.csv and keeps ratio_dev_max."""
    from controlrl.population import group_run

    argv = ["--env-id", "bandit:bernoulli-10", "--total-timesteps", "32", *SMALL, *QUIET]
    argv += ["--num-seeds", "2"] if population else []
    args = parse(grpo.Args, [*argv, "--run-dir", str(tmp_path / "run")])
    run = group_run(args)
    policy = run.make_policy(args.hidden_sizes)
    calls = []

    def sample(obs):
        calls.append(obs.shape[0])
        return policy.sample(obs)

    run.train(lambda rollout, old_logp: {}, policy, sample=sample)
    assert calls == [16 * (2 if population else 1)] * 2
    header = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "train/ratio_dev_max" in header and "train/ratio_dev_frac" not in header


def test_grpo_batch_carries_each_rows_score_and_its_groups():
    """--policy-loss gbpo / nft: row t * N + n carries the score of env n's episode and the G
    scores of its group (n // G), as the advantage saw them; and nft's update gradient at
    theta = theta_old is clip's (T-G8, float32), while gbpo's is not."""
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    lengths, returns = [2, 3, 1, 3, 3, 2, 1, 2], [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    rollout = rollout_of(policy, lengths, returns, 4)
    old_logp, _, _ = rollout.log_probs(policy)
    grads = {}
    for name in ("nft", "clip", "gbpo"):
        args = grpo.Args(num_envs=8, group_size=4, policy_loss=name)
        batch, ratios, _ = grpo.grpo_batch(rollout, old_logp, policy, args)
        if name != "clip":
            scores = torch.tensor(returns, dtype=torch.float32)
            torch.testing.assert_close(batch["scores"], scores.repeat(3), rtol=0, atol=0)
            groups = scores.reshape(2, 4).repeat_interleave(4, 0).repeat(3, 1)  # [T * N, G]
            torch.testing.assert_close(batch["group_scores"], groups, rtol=0, atol=0)
        else:
            assert "scores" not in batch and "group_scores" not in batch
        logp, _ = policy.log_prob_entropy(batch["obs"], batch["actions"], False)
        idx = torch.arange(logp.numel())
        t = Tokens(logp, batch["logprobs"], ratios(logp, batch["logprobs"], idx),
                   batch["advantages"], batch["ref_logprobs"], batch["weights"],
                   score=batch.get("scores"), group_scores=batch.get("group_scores"))  # fmt: skip
        loss, _ = grpo.grpo_loss(t, grpo.objective_of(args))
        grads[name] = torch.autograd.grad(loss, list(policy.parameters()))
    for a, b in zip(grads["nft"], grads["clip"], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert max(float((a - b).abs().max()) for a, b in zip(grads["gbpo"], grads["clip"])) > 1e-4


def test_gbpo_with_groups_of_one_trains(tmp_path):
    """--policy-loss gbpo --group-size 1 (the TPO reference's one answer per prompt, with the
    batch-mean baseline): the target takes the reference's median 0 and std 1 for a group of
    one, so the update's loss is finite (the unbiased std of one score is NaN)."""
    argv = ["--env-id", "bandit:bernoulli-10", "--group-size", "1", "--adv-norm", "batch-mean"]
    argv += ["--policy-loss", "gbpo", "--total-timesteps", "64", "--num-envs", "16"]
    grpo.main(parse(grpo.Args, [*argv, "--hidden-sizes", "8", *QUIET, "--run-dir", str(tmp_path)]))
    header, *rows = (tmp_path / "metrics.csv").read_text().splitlines()
    losses = [float(dict(zip(header.split(","), row.split(",")))["train/loss"]) for row in rows]
    assert len(losses) == 4 and np.isfinite(losses).all()


@pytest.mark.parametrize("adv_norm, std", [("mean", False), ("mean-std", True), ("rloo", True)])
def test_gbpo_target_std_follows_the_advantage_norm(adv_norm, std):
    """--adv-norm mean turns off GBPO's division of its target by the group's std (the
    reference's norm_adv_by_std_in_grpo False); every other estimator keeps it."""
    args = grpo.Args(policy_loss="gbpo", adv_norm=adv_norm)
    assert grpo.objective_of(args).gbpo_std is std


def test_gpg_advantage_reaches_the_batch():
    """--adv-norm gpg (GPG's recipe): r - group mean times alpha = B / (B - M), here 2 groups
    of 4 with one flat: alpha 2."""
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    lengths, returns = [2, 3, 1, 3, 3, 2, 1, 2], [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    rollout = rollout_of(policy, lengths, returns, 4)
    batch, _ = batch_of(rollout, policy, policy, adv_norm="gpg", policy_loss="reinforce")
    want = 2 * group_advantages(torch.tensor(returns).double().reshape(2, 4), "mean")
    torch.testing.assert_close(
        first_step_advantages(batch, 3, 8), want.reshape(-1).float().double()
    )


@pytest.mark.parametrize("population", [False, True])
def test_a_mismatched_sampler_logs_its_kl_to_the_policy(population, tmp_path):
    """--rollout-mismatch logs train/mismatch_kl, KL(sampler || policy) per step: > 0 for the
    bf16 and fp8 networks (fp8 the larger) and the temperature sampler (the larger), for every
    seed of a population."""
    import csv

    kl = {}
    for kind in ("bf16-forward", "fp8-forward", "temperature"):
        run_dir = tmp_path / kind
        argv = ["--env-id", "bandit:bernoulli-10", "--total-timesteps", "64", *SMALL, *QUIET]
        argv += ["--rollout-mismatch", kind, "--mismatch-correction", "tis"]
        argv += ["--num-seeds", "2"] if population else []
        grpo.main(parse(grpo.Args, [*argv, "--run-dir", str(run_dir)]))
        rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
        kl[kind] = np.array([float(r["train/mismatch_kl"]) for r in rows])
        assert len(kl[kind]) == 4 * (2 if population else 1) and (kl[kind] > 0).all()
    assert kl["temperature"].mean() > 10 * kl["bf16-forward"].mean()
    assert kl["fp8-forward"].mean() > kl["bf16-forward"].mean()


@pytest.mark.parametrize("population", [False, True])
def test_a_lagged_sampler_is_the_policy_of_k_updates_ago(population, tmp_path):
    """--rollout-lag 2: the first rollout is the policy's own (mismatch_kl 0 for every seed),
    the later ones a stale policy's (> 0)."""
    import csv

    argv = ["--env-id", "bandit:bernoulli-10", "--total-timesteps", "64", *SMALL, *QUIET]
    argv += ["--rollout-lag", "2", "--mismatch-correction", "tis", "--learning-rate", "0.05"]
    argv += ["--num-seeds", "2"] if population else []
    grpo.main(parse(grpo.Args, [*argv, "--run-dir", str(tmp_path / "run")]))
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    kl = np.array([float(r["train/mismatch_kl"]) for r in rows]).reshape(4, -1)
    assert (kl[0] == 0).all() and (kl[1:] > 0).all()
