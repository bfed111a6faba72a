"""BPO (Ao et al. 2026, "Bounded Ratio Reinforcement Learning"; reference
bounded-ratio-rl/bounded_ratio_rl src/sb3/BPO.py): the per-sample loss, the target ratio, the
median head, smoke runs."""

import pytest
import torch
from test_spo import smoke  # sibling file: pytest puts tests/algos on sys.path

from algos.bpo import MedianCritic, bpo_loss, median_loss, target_ratio

EPS = 0.3


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def per_sample_loss(r: torch.Tensor, q: float, v: float, u: float, temperature: float = 1e-3):
    """The loss of one sample (B = 1) as a function of r (old logp = 0)."""
    return bpo_loss(
        r.log(),
        torch.zeros_like(r),
        torch.tensor([q]).double(),
        torch.tensor([v]).double(),
        torch.tensor([u]).double(),
        EPS,
        temperature,
    )[0]


@pytest.mark.parametrize("q, v, u, temperature", [(2.0, 0.5, 1.0, 1e-3), (-1.0, 0.3, 0.2, 0.5)])
def test_per_sample_loss_is_minimised_exactly_at_the_target_ratio(q, v, u, temperature):
    target = target_ratio(torch.tensor(q).double(), torch.tensor(u).double(), EPS, temperature)
    target = target.item()
    grid = torch.linspace(0.5, 1.5, 2001).double()
    losses = torch.stack([per_sample_loss(x[None], q, v, u, temperature) for x in grid])
    assert grid[losses.argmin()].item() == pytest.approx(target, abs=1e-3)
    assert (
        per_sample_loss(torch.tensor([target], dtype=torch.float64), q, v, u, temperature) < 1e-12
    )
    for side in (-1, 1):  # d loss / d r = |q - V| sign(r - r_target)
        r = torch.tensor([target + side * 0.05], dtype=torch.float64).requires_grad_(True)
        (grad,) = torch.autograd.grad(per_sample_loss(r, q, v, u, temperature), r)
        assert grad.item() == pytest.approx(abs(q - v) * side)


def test_target_ratio_inside_the_bound_and_a_sign_for_small_temperature():
    torch.manual_seed(0)
    q, u = 100 * torch.randn(10_000), 100 * torch.randn(10_000)
    for temperature in (1e-3, 1.0, 1e3):
        t = target_ratio(q.double(), u.double(), EPS, temperature)
        # strictly inside in exact arithmetic; the sigmoid saturates in floating point
        assert torch.all((t >= 1 - EPS) & (t <= 1 + EPS))
        if temperature == 1e3:
            assert torch.all((t > 1 - EPS) & (t < 1 + EPS))
    t = target_ratio(torch.tensor([1.0, -1.0]).double(), torch.zeros(2).double(), EPS, 1e-3)
    torch.testing.assert_close(t, torch.tensor([1 + EPS, 1 - EPS]).double())


def fit_scalar(samples: torch.Tensor, steps: int = 3000, lr: float = 1.0) -> float:
    u = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([u], lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 - i / steps)
    for _ in range(steps):
        opt.zero_grad()
        median_loss(u, samples).backward()
        opt.step()
        sched.step()
    return u.item()


def test_median_head_converges_to_the_median_of_a_skewed_sample_not_the_mean():
    g = torch.Generator().manual_seed(0)
    samples = torch.empty(20_000, dtype=torch.float64).exponential_(1 / 100.0, generator=g)
    median, mean = samples.median().item(), samples.mean().item()  # ~69.3 and ~100
    u = fit_scalar(samples)
    assert abs(u - median) < 2.0 and abs(u - mean) > 25
    small = samples / 10_000  # spread 0.01: log cosh is quadratic there, the fit is the mean
    u_small = fit_scalar(small, lr=1e-3)
    assert abs(u_small - small.mean().item()) < 0.1 * abs(small.mean() - small.median()).item()


def test_median_head_of_the_critic_learns_a_median():
    torch.manual_seed(0)
    critic = MedianCritic(2, (16,), torch.nn.Tanh).double()
    opt = torch.optim.Adam(critic.parameters(), lr=0.05)
    obs = torch.zeros(1, 2).double()  # one state: U(s) must become the sample median of q
    q = torch.empty(4096).double().exponential_(1 / 50.0)
    for _ in range(1500):
        opt.zero_grad()
        median_loss(critic.value_and_median(obs)[1].expand_as(q), q).backward()
        opt.step()
    u = critic.value_and_median(obs)[1].item()
    assert abs(u - q.median().item()) < 3.0 and abs(u - q.mean().item()) > 10


def test_median_head_is_an_mlp_on_the_critic_features_as_the_reference():
    """The reference's u_net: create_mlp(latent_dim_vf, 1, net_arch["pi"]) on the critic's
    features, every layer orthogonal with gain 1 (singular values all 1)."""
    torch.manual_seed(0)
    critic = MedianCritic(5, (32, 24), torch.nn.ReLU, u_hidden=(16, 8))
    linear = [m for m in critic.u if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(24, 16), (16, 8), (8, 1)]
    assert sum(isinstance(m, torch.nn.ReLU) for m in critic.u) == 2
    for m in linear:
        torch.testing.assert_close(
            torch.linalg.svdvals(m.weight.detach()), torch.ones(min(m.weight.shape))
        )
        assert not m.bias.detach().any()
    # U reads the trunk's features: its gradient reaches the shared trunk
    u = critic.value_and_median(torch.randn(7, 5))[1]
    assert u.shape == (7,)
    grads = torch.autograd.grad(u.sum(), list(critic.trunk.parameters()))
    assert all(g.abs().sum() > 0 for g in grads)
    # by default the head takes the trunk's hidden sizes (main passes the policy's)
    default = MedianCritic(5, (32, 24), torch.nn.Tanh)
    assert [m.out_features for m in default.u if isinstance(m, torch.nn.Linear)] == [32, 24, 1]


@pytest.mark.parametrize("env_id", ["Hopper-v5", "CartPole-v1"])
def test_smoke(env_id, tmp_path):
    run = smoke("algos/bpo.py", env_id, tmp_path, "--hidden-sizes", "32", "32")
    assert "train/median_loss" in (run / "metrics.csv").read_text().splitlines()[0]
