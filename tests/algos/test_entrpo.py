"""EnTRPO (algos/trpo.py --entropy-coef, --replay-rollouts): the entropy term is GAE of the
entropy-augmented rewards minus TRPO's own, a plain discounted sum inside each episode; the
replayed surrogate weights each sample by its own collecting policy; the flags run end to end."""

import numpy as np
import torch

from algos import trpo
from algos.trpo import Args, entropy_advantage, entrpo_surrogate
from controlrl.nets import CategoricalPolicy
from controlrl.returns import gae


def test_entropy_term_is_the_gae_of_the_augmented_rewards():
    rng = np.random.default_rng(0)
    T, N = 12, 3
    r, V, V_next = rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, N))
    ended = rng.random((T, N)) < 0.2
    terminated = ended & (rng.random((T, N)) < 0.5)
    H = rng.random((T, N))
    args = Args(entropy_coef=0.3, gamma=0.9, gae_lambda=0.8)
    bonus = entropy_advantage(torch.as_tensor(H), terminated, ended, args).numpy()
    both = gae(r + 0.3 * H, V, V_next, terminated, ended, 0.9, 0.8) - gae(
        r, V, V_next, terminated, ended, 0.9, 0.8
    )
    np.testing.assert_allclose(bonus, both.reshape(-1), rtol=0, atol=1e-5)
    loop = np.zeros((T, N))  # sum_l (gamma lambda)^l alpha H_{t+l} up to the episode's end
    for n in range(N):
        for t in range(T):
            acc, w = 0.0, 1.0
            for u in range(t, T):
                acc += w * 0.3 * H[u, n]
                if ended[u, n]:
                    break
                w *= 0.9 * 0.8
            loop[t, n] = acc
    np.testing.assert_allclose(bonus, loop.reshape(-1), rtol=0, atol=1e-5)


def test_replayed_surrogate_uses_each_samples_own_behaviour_policy():
    torch.manual_seed(0)
    policy = CategoricalPolicy(3, 4, (8,))
    data = []
    for _ in range(2):
        obs, actions = torch.randn(5, 3), torch.randint(0, 4, (5,))
        data.append(
            {"obs": obs, "actions": actions, "logprobs": torch.randn(5), "adv": torch.randn(5)}
        )
    want = torch.cat(
        [
            torch.exp(policy.log_prob_entropy(d["obs"], d["actions"])[0] - d["logprobs"]) * d["adv"]
            for d in data
        ]
    ).mean()
    torch.testing.assert_close(entrpo_surrogate(policy, data), want)
    one = entrpo_surrogate(policy, data[:1])
    assert not torch.allclose(one, want)


def test_entrpo_runs_and_differs_from_trpo(tmp_path):
    def run(name, *flags):
        args = Args(env_id="CartPole-v1", total_timesteps=1024, num_steps=128, seed=3,
                    eval_every=0, eval_episodes=1, progress=False, tensorboard=False,
                    run_dir=str(tmp_path / name), **dict(flags))  # fmt: skip
        trpo.main(args)
        return (tmp_path / name / "metrics.csv").read_text().splitlines()

    base = run("trpo")
    ent = run("entrpo", ("entropy_coef", 0.01), ("replay_rollouts", 1))
    assert "train/entropy_advantage" in ent[0] and "train/entropy_advantage" not in base[0]
    assert len(ent) == len(base) == 5
    assert ent[2].split(",")[4:6] != base[2].split(",")[4:6]
