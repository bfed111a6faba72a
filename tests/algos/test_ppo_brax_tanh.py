"""algos/ppo_brax.py --policy tanh_normal (the distribution itself: tests/controlrl/
test_jax_policy.py): the rollout stores raw actions whose ratio is exactly 1 at the rollout's
parameters; the update draws one entropy key per minibatch; runs complete, resume, and refuse a
checkpoint of the other policy. brax:inverted_pendulum keeps compiles short."""

import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("brax")

from test_ppo_brax import TINY, first_batch, make, reference_update, run  # noqa: E402  # sibling file: tests/algos is on sys.path

from algos import ppo_brax as pb  # noqa: E402

TANH = ["--policy", "tanh_normal"]


@pytest.fixture(scope="module")
def tanh_setup(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("unused") / "r"
    # an entropy bonus (ppo.py's default is 0) so that the entropy estimate moves the update
    return make([*TINY, *TANH, "--ent-coef", "0.5", "--run-dir", str(run_dir)])


def test_rollout_stores_raw_actions_whose_ratio_is_one(tanh_setup):
    args, env, (reset, rollout, update, _, tx) = tanh_setup
    jax = pb._jax()
    params, batch = first_batch(args, env, reset, rollout, seed=0)
    assert "log_std" not in params
    assert params["actor"][-1][0].shape[-1] == 2 * env.action_size  # (loc, scale)
    b = {k: np.asarray(v) for k, v in batch.items()}
    # raw (pre-tanh) actions are stored: std ~0.7 at init puts some beyond [-1, 1]
    assert (np.abs(b["action"]) > 1).any()
    head = pb.mlp(params["actor"], b["obs"], args.activation)
    np.testing.assert_allclose(b["mean"], np.asarray(head), rtol=1e-5, atol=1e-6)
    logp = np.asarray(pb.policy_log_prob("tanh_normal", params, head, b["action"]))
    np.testing.assert_allclose(np.exp(logp - b["logp"]), 1.0, atol=1e-5)
    # an update with a zero step leaves the policy: ratios 1, KL 0, in the loss and after it
    _, _, out = update(params, pb.init_optimizer(tx, params), batch, jax.random.PRNGKey(3), 0.0)
    assert float(out["ratio_dev_max"]) < 1e-5 and float(out["kl_max"]) < 1e-6
    assert float(out["clip_frac"]) == 0 and abs(float(out["approx_kl"])) < 1e-6
    assert math.isfinite(float(out["entropy"]))


def test_update_draws_one_entropy_key_per_minibatch(tanh_setup):
    """The update equals plain Adam steps on the parameter tree, minibatch j of each epoch
    estimating the entropy with its own key (Brax's sgd_step: a key per minibatch)."""
    args, env, (reset, rollout, update, _, tx) = tanh_setup
    jax = pb._jax()
    params, batch = first_batch(args, env, reset, rollout, seed=5)
    key, lr = jax.random.PRNGKey(7), 1e-2
    new, _, _ = update(params, pb.init_optimizer(tx, params), batch, key, lr)

    def entropy_keys(key_e):  # Brax's sgd_step: a key per minibatch
        return jax.random.split(jax.random.fold_in(key_e, 1), args.num_minibatches)

    ref, _, _ = reference_update(args, tx, params, batch, key, lr, entropy_keys)
    for a, b in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_tanh_normal_run_completes_resumes_and_refuses_the_other_policy(tmp_path):
    c = tmp_path / "c"
    # a 2-iteration run, then extended to 4: resumes and continues at step 192
    run(*TINY, *TANH, "--total-timesteps", "128", "--checkpoint-every", "1", "--run-dir", str(c))
    assert json.loads((c / "config.json").read_text())["args"]["policy"] == "tanh_normal"
    assert math.isfinite(json.loads((c / "final_eval.json").read_text())["eval_return_mean"])
    ckpt = torch.load(c / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["jax"]["flags"] == {"policy": "tanh_normal"}
    config = json.loads((c / "config.json").read_text())
    config["args"]["total_timesteps"] = 256
    # the same run under the other policy: one line naming the flag, exit 2, nothing written
    other = json.loads(json.dumps(config))
    other["args"]["policy"] = "gaussian"
    (c / "config.json").write_text(json.dumps(other))
    out = run("--resume", str(c), check=False)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert "written with --policy tanh_normal, this run has gaussian" in lines[-1]
    assert (c / "metrics.csv").read_text().count("\n") == 3  # header and 2 rows, untouched
    (c / "config.json").write_text(json.dumps(config))
    run("--resume", str(c))
    steps = [int(line.split(",")[0]) for line in (c / "metrics.csv").read_text().split()[1:]]
    assert steps == [64, 128, 192, 256]
