"""controlrl.replay.ReplayBuffer: segments of true transitions across episode ends and ring
wraps, valid and uniform starts, seeding, exact state_dict round trip, bad arguments."""

import io

import numpy as np
import pytest
import torch

from controlrl.replay import ReplayBuffer

OBS_DIM, ACT_DIM = 3, 2


class FakeVecEnv:
    """E envs whose observations encode (global step, env, kind): kind 0 = an observation the
    policy acts on, 1 = the true final observation of an ended episode (never stored as obs).
    Episodes end every few steps, terminated or truncated, at different times per env."""

    def __init__(self, num_envs, seed=0, p_end=0.2):
        self.E, self.t, self.p_end = num_envs, 0, p_end
        self.rng = np.random.default_rng(seed)
        self.obs = self._obs(kind=0)
        self.truth = {}  # (t, env) -> the transition as the buffer should return it

    def _obs(self, kind):
        o = np.zeros((self.E, OBS_DIM), np.float32)
        o[:, 0], o[:, 1], o[:, 2] = self.t, np.arange(self.E), kind
        return o

    def step(self):
        """One vector step; returns the ReplayBuffer.add arguments."""
        E = self.E
        obs = self.obs
        actions = self.rng.normal(size=(E, ACT_DIM)).astype(np.float32)
        logp = self.rng.normal(size=E).astype(np.float32)
        rewards = self.rng.normal(size=E).astype(np.float32)
        ended = self.rng.random(E) < self.p_end
        terminated = ended & (self.rng.random(E) < 0.5)
        truncated = ended & ~terminated
        self.t += 1
        after = self._obs(kind=0)  # reset obs where ended (what the next step acts on)
        final = self._obs(kind=1)
        next_obs = np.where(ended[:, None], final, after)  # true next obs
        for e in range(E):
            self.truth[(self.t - 1, e)] = {
                "obs": obs[e],
                "actions": actions[e],
                "behaviour_logp": logp[e],
                "rewards": rewards[e],
                "terminated": float(terminated[e]),
                "ended": float(ended[e]),
                "next_obs": next_obs[e],
            }
        self.obs = after
        return obs, actions, logp, rewards, terminated, truncated, next_obs


def filled(capacity=20, num_envs=3, K=4, steps=47, seed=0, p_end=0.2):
    buf = ReplayBuffer(capacity, num_envs, OBS_DIM, ACT_DIM, K)
    env = FakeVecEnv(num_envs, seed, p_end)
    for _ in range(steps):
        buf.add(*env.step())
    return buf, env


def check_segments(batch, env, capacity, steps):
    """Every step of every segment is the true transition it claims to be, one env, contiguous
    in time, and among the last `capacity` steps written."""
    N, K = batch["rewards"].shape
    for key, shape in (("obs", (N, K, OBS_DIM)), ("actions", (N, K, ACT_DIM))):
        assert batch[key].shape == shape
    t = batch["obs"][..., 0].long()
    e = batch["obs"][..., 1].long()
    assert bool((batch["obs"][..., 2] == 0).all())  # acted-on observations only
    assert bool((e == e[:, :1]).all())
    assert bool((t == t[:, :1] + torch.arange(K)).all())  # contiguous: no wrap past the pointer
    assert int(t.min()) >= max(0, steps - capacity) and int(t.max()) <= steps - 1
    for i in range(N):
        for k in range(K):
            truth = env.truth[(int(t[i, k]), int(e[i, k]))]
            for key, value in truth.items():
                np.testing.assert_array_equal(batch[key][i, k].numpy(), value, err_msg=key)


@pytest.mark.parametrize("steps", [9, 20, 47, 60])  # before, at, past and far past a wrap
def test_segments_are_true_transitions(steps):
    buf, env = filled(steps=steps)
    assert len(buf) == min(steps, 20) * 3
    batch = buf.sample(400, torch.Generator().manual_seed(1))
    check_segments(batch, env, 20, steps)
    # the newest step and ended steps are in the draw, so their next_obs was checked
    t = batch["obs"][..., 0]
    assert bool((t == steps - 1).any()) and bool((batch["ended"] == 1).any())
    assert batch["terminated"].dtype == batch["ended"].dtype == torch.float32


def test_each_observation_stored_once():
    # ends at nearly every step: the final-observation table grows past its first 64 rows,
    # yet stays within twice the ends the buffer can hold
    capacity, E, steps = 64, 2, 200
    buf, env = filled(capacity=capacity, num_envs=E, steps=steps, p_end=0.9)
    # the arrays the buffer owns (everything else is a view of them): one table of
    # [obs | action | log mu | r | terminated | ended] with one spare row, the end ids, and the
    # final observations, at most twice the ends the buffer can hold
    owned = {k: a for k, a in vars(buf).items() if isinstance(a, np.ndarray) and a.base is None}
    width = OBS_DIM + ACT_DIM + 4
    assert {k: a.shape for k, a in owned.items() if k != "finals"} == {
        "table": (capacity + 1, E, width),
        "final_id": (capacity + 1, E),
        "_steps": (4,),
    }
    assert buf.ends_added - buf.ends_dropped == int(buf.ended[buf.pos + 1 :].sum()) + int(
        buf.ended[: buf.pos].sum()
    )  # live ends: those of the stored rows (all but the spare row pos)
    assert owned["finals"].shape[1] == OBS_DIM
    assert 64 < len(buf.finals) <= 2 * capacity * E
    for view in (buf.obs, buf.actions, buf.rewards, buf.ended, buf._obs_flat, buf._table_flat):
        assert np.shares_memory(view, buf.table)
    check_segments(buf.sample(300, torch.Generator().manual_seed(2)), env, capacity, steps)


def test_final_observations_survive_growth_after_wraps():
    # few ends for a while (ids pass the table's 64 rows and the ring wraps), then an end at
    # nearly every step: the table grows while the live ids are not aligned with its rows
    capacity, E = 40, 2
    buf, env = filled(capacity=capacity, num_envs=E, steps=200, p_end=0.3)
    first_rows = len(buf.finals)
    env.p_end = 0.95
    while len(buf.finals) == first_rows and env.t < 200 + capacity:
        buf.add(*env.step())
    # just grown (sampled now, before the moved rows leave the ring)
    assert len(buf.finals) > first_rows and buf.ends_dropped > 0
    assert buf.ends_dropped % first_rows != 0  # misaligned: the rows had to move
    check_segments(buf.sample(500, torch.Generator().manual_seed(5)), env, capacity, env.t)


@pytest.mark.parametrize("steps", [7, 33])  # not yet full, and wrapped
def test_starts_are_uniform_over_valid_starts(steps):
    capacity, E, K = 10, 2, 3
    buf, _ = filled(capacity=capacity, num_envs=E, K=K, steps=steps)
    n = 60_000
    batch = buf.sample(n, torch.Generator().manual_seed(3))
    t0 = batch["obs"][:, 0, 0].long().numpy()
    e0 = batch["obs"][:, 0, 1].long().numpy()
    oldest = max(0, steps - capacity)
    valid = [(t, e) for t in range(oldest, steps - K + 1) for e in range(E)]
    counts = {s: 0 for s in valid}
    for s in zip(t0.tolist(), e0.tolist()):
        counts[s] += 1  # KeyError: a start outside the valid set
    expected = n / len(valid)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    # chi-square with len(valid) - 1 <= 15 dof: P(chi2 > 45) < 1e-4
    assert min(counts.values()) > 0 and chi2 < 45.0, counts


def test_seeded_sampling():
    buf, _ = filled()
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a, b = buf.sample(32, g1), buf.sample(32, g2)
    for key in a:
        assert torch.equal(a[key], b[key])
    c = buf.sample(32, g1)  # the generator moved on: another batch
    assert not torch.equal(a["obs"], c["obs"])


def test_state_dict_round_trip_exact():
    buf, env = filled(steps=53)
    buffer_file = io.BytesIO()
    torch.save(buf.state_dict(), buffer_file)
    buffer_file.seek(0)
    state = torch.load(buffer_file, weights_only=True)  # as controlrl.checkpoint loads
    other = ReplayBuffer(20, 3, OBS_DIM, ACT_DIM, 4)
    other.load_state_dict(state)
    for _ in range(2):  # equal now, and after both take the same further steps (the pointer)
        for key, value in vars(buf).items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(getattr(other, key), value, err_msg=key)
            elif isinstance(value, int):  # pos, size, episode-end counters, dims
                assert getattr(other, key) == value, key
        a = buf.sample(64, torch.Generator().manual_seed(4))
        b = other.sample(64, torch.Generator().manual_seed(4))
        for key in a:
            assert torch.equal(a[key], b[key]), key
        for _ in range(13):
            step = env.step()
            buf.add(*step)
            other.add(*step)
    with pytest.raises(ValueError, match="does not fit"):
        ReplayBuffer(21, 3, OBS_DIM, ACT_DIM, 4).load_state_dict(state)


def test_bad_arguments_name_the_argument():
    for kwargs, name in (
        ({"segment_length": 0}, "segment_length"),
        ({"segment_length": 11}, "segment_length"),
        ({"capacity": 0, "segment_length": 1}, "capacity"),
        ({"num_envs": 0}, "num_envs"),
    ):
        args = {"capacity": 10, "num_envs": 2, "obs_dim": 3, "act_dim": 1, "segment_length": 4}
        args.update(kwargs)
        with pytest.raises(ValueError, match=f"^{name} = "):  # the message starts with it
            ReplayBuffer(**args)
    ReplayBuffer(10, 2, 3, 1, 10)  # K = capacity is allowed
    buf, _ = filled(capacity=10, K=4, steps=3)
    assert not buf.can_sample()
    with pytest.raises(ValueError, match="segment_length"):
        buf.sample(1, torch.Generator())
    step = FakeVecEnv(3).step()
    for i in (0, 6):  # one env's observation would broadcast to all three envs
        bad = list(step)
        bad[i] = bad[i][0]
        with pytest.raises(ValueError, match=r"obs and next_obs must be \[num_envs, obs_dim\]"):
            buf.add(*bad)
    buf.add(*step)
    assert buf.can_sample()
