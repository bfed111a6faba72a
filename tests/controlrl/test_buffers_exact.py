"""controlrl.buffers.RolloutBuffer, exactly: array dtypes and shapes, the batched log-prob fill
and the flat batch (rows in t-major order, views that share the buffer's memory)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from controlrl.buffers import RolloutBuffer


@pytest.mark.parametrize("discrete", [False, True])
def test_arrays_dtypes_and_shapes(discrete):
    buf = RolloutBuffer(3, 2, (4,), () if discrete else (1,), discrete=discrete)
    assert buf.obs.shape == (3, 2, 4) and buf.obs.dtype == np.float32
    assert buf.actions.dtype == (np.int64 if discrete else np.float32)
    assert buf.actions.shape == ((3, 2) if discrete else (3, 2, 1))
    for name in ("rewards", "values", "next_values", "logprobs"):
        arr = getattr(buf, name)
        assert arr.shape == (3, 2) and arr.dtype == np.float32, name
    for name in ("terminated", "ended"):
        arr = getattr(buf, name)
        assert arr.shape == (3, 2) and arr.dtype == np.bool_, name
    assert buf.actions_t.dtype == (torch.int64 if discrete else torch.float32)


def _filled():
    buf = RolloutBuffer(3, 2, (2,), (1,), discrete=False)
    buf.obs[:] = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    buf.actions[:] = np.arange(6, dtype=np.float32).reshape(3, 2, 1) * 10
    return buf


def test_fill_logprobs_in_one_batched_pass():
    buf, calls = _filled(), []

    class Policy:  # distribution parameters = the obs rows; log-prob = obs[0] + action[0]
        def dist_params(self, obs):
            calls.append(obs.shape)
            return obs * 1.0

        def log_prob_at(self, params, actions):
            calls.append((params.shape, actions.shape))
            return params[:, 0] + actions[:, 0]  # [T*N]

    params = buf.fill_logprobs(Policy())
    assert calls == [torch.Size([6, 2]), (torch.Size([6, 2]), torch.Size([6, 1]))]
    expected = buf.obs[..., 0] + buf.actions[..., 0]
    np.testing.assert_array_equal(buf.logprobs, expected)
    # the parameters the KL is measured against: the same pass, T-major rows, a copy
    torch.testing.assert_close(params, torch.from_numpy(buf.obs.reshape(6, 2)), rtol=0, atol=0)
    buf.obs[0, 0, 0] = 123.0
    assert params[0, 0] != 123.0


def test_flat_rows_are_t_major_views():
    buf = _filled()
    buf.logprobs[:] = np.arange(6, dtype=np.float32).reshape(3, 2) - 3
    buf.values[:] = np.arange(6, dtype=np.float32).reshape(3, 2) * 2
    adv = np.arange(6, dtype=np.float64).reshape(3, 2) / 4
    flat = buf.flat(advantages=adv, returns=adv + 1)
    assert set(flat) == {"obs", "actions", "logprobs", "values", "advantages", "returns"}
    torch.testing.assert_close(flat["obs"], torch.arange(12.0).reshape(6, 2))
    torch.testing.assert_close(flat["actions"], torch.arange(6.0).reshape(6, 1) * 10)
    torch.testing.assert_close(flat["logprobs"], torch.arange(6.0) - 3)
    torch.testing.assert_close(flat["values"], torch.arange(6.0) * 2)
    torch.testing.assert_close(flat["advantages"], torch.arange(6.0) / 4)
    torch.testing.assert_close(flat["returns"], torch.arange(6.0) / 4 + 1)
    assert flat["advantages"].dtype == torch.float32
    buf.obs[2, 1, 0] = -1.0  # views: the flat batch sees later writes
    buf.logprobs[0, 1] = 99.0
    assert flat["obs"][5, 0] == -1.0 and flat["logprobs"][1] == 99.0
