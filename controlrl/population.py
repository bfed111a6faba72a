"""Population runs: S independent learners of a group method (GRPO, TPO, ...) on a bandit in one
process, the seed a leading batch dimension of the parameters, the optimiser state, the
environments and the rollouts (PureJaxRL's `vmap(train)(keys)`, on CPU with torch.func).

    python algos/grpo.py --env-id bandit:bernoulli-10 --num-seeds 1000 --seed 0

(ppo.py's actor-critic path, with its critic, GAE and reward scaler, is
controlrl/population_actor_critic.py, on the PopulationSession and PopulationPolicy below; on
Gymnasium and envpool: ids, controlrl/population_control.py.)

Seed k of a population (--seed s --num-seeds S: seeds s, ..., s + S - 1) is the run `--seed
s + k` alone: its policy is initialised after torch.manual_seed(s + k) as that run's is, its
torch stream (action samples, minibatch shuffles) is a torch.Generator that continues from
there, its bandit draws from its own numpy generator (envs.bandits.make_population), and its
observation normaliser, Adam state and learning rate are its own. The algorithm's own code runs
on batched tensors: its batch builder works on any leading axes, its per-minibatch loss_fn is
vmapped over the seeds (torch.func.vmap of the policy's methods under functional_call with that
seed's parameters), and controlrl.update.minibatch_update hands a population's optimiser the
loop (controlrl/population_update.py: per-seed shuffles, per-seed gradient-norm clip, fused
Adam on each seed's row of one [S, P] parameter). An objective written as a loss_fn for
minibatch_update is population-capable without a line of its own. With --torch-threads T the
per-seed draws (action noise, shuffles) run on T threads, each seed's on one of them.

Exactness: S = 1 computes what the single run computes, op for op (its metrics.csv is the
single run's, byte for byte, once the seed column is dropped). For S > 1 vmap's batched
matmuls replace the plain ones, so seed k agrees with its single run up to float rounding.
Where every observation of a seed is the same (bandits with one context), the policy is
evaluated on one row per seed and broadcast: the same forward values, the gradients summed in
another order. With one minibatch per epoch a seed's loss takes the rollout's rows in their own
order, not its shuffle's (the shuffle is still drawn, so its stream stays the single run's): a
permutation of the rows changes only the order of summation.

A run directory like any run's: config.json, checkpoints (every seed's parameters, optimiser,
normaliser and generator state; --resume continues bit for bit), timing.csv, and
  metrics.csv      one row per seed and iteration: step, seed, then the single run's columns
  aggregate.csv    one row per iteration: step, seeds, then for every metric its mean over the
                   seeds and <name>_lo, <name>_hi, the 95% t-interval of that mean (Student t
                   with S - 1 degrees of freedom; empty below 5 seeds)
  tb/              TensorBoard of aggregate.csv's means
  final_eval.json  eval_return_mean (the mean over seeds) and eval_return_per_seed
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import warnings
from dataclasses import dataclass
from operator import attrgetter
from typing import ClassVar

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from controlrl import diagnostics, rundir
from controlrl.cli import require
from controlrl.group import zero_variance_mask
from controlrl.group_rollout import GroupCollector, GroupRollout
from controlrl.logger import _CsvLog, truncate_csv
from controlrl.nets import CategoricalPolicy, make_policy
from controlrl.normalize import ObsNormalizer
from controlrl.population_update import ROW_FLOATS, PopulationAdam, SeedGenerators, SeedPool
from controlrl.seeding import eval_seed, reset_seed
from controlrl.session import Session, Timer

# the stacked parameters are column slices of one [S, P] tensor, their gradients the same
# slices of its gradient: torch says so once per run, and it costs nothing measurable here
warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout")
CI_MIN_SEEDS = 5  # intervals from at least this many seeds (fewer: the columns stay empty)
BASE_BYTES = 1 << 29  # the process itself: torch, numpy, the interpreter


# the backends whose envs a population batches: bandits (every --num-seeds file), and
# Gymnasium and EnvPool for the actor-critic files (controlrl/population_control.py)
BACKEND_NAMES = {"bandit": "bandit:", "gym": "Gymnasium", "envpool": "envpool:", "brax": "brax:"}
ENV_BYTES = 1 << 22  # a simulator env (a MuJoCo env measures ~1.1-1.5 MB), with margin
BRAX_ENV_BYTES = 1 << 16  # a brax env: its state measures 2-4 kB (ant, humanoid), with margin


@dataclass
class PopulationArgs:
    """The --num-seeds option: a mixin listed before CommonArgs; validate with
    require_population_flags. An Args whose file batches more backends than bandits lists them
    in population_backends (a class attribute, not a flag)."""

    population_backends: ClassVar[tuple[str, ...]] = ("bandit",)

    num_seeds: int | None = None
    """train seeds --seed, ..., --seed + S - 1 at once in one process, the seed a batch dimension
    (controlrl/population.py): one run directory, metrics.csv with a seed column, aggregate.csv
    with the mean and 95% t-interval over seeds, final_eval.json per seed"""


def require_population_flags(args) -> None:
    """--num-seeds >= 1, an env id of a backend the file batches, ratios that a population
    filters, and memory enough."""
    S = args.num_seeds
    if S is None:
        return
    from envs import split_id

    require(S >= 1, "num_seeds", f"must be >= 1, got {S}")
    backend = split_id(args.env_id)[0]
    allowed = type(args).population_backends
    names = [BACKEND_NAMES[b] for b in allowed]
    names = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    require(
        backend in allowed,
        "num_seeds",
        f"needs a {names} env id (its envs batch over seeds), got {args.env_id}",
    )
    if backend == "bandit":
        from envs.bandits import lockstep

        require(
            lockstep(split_id(args.env_id)[1]),
            "num_seeds",
            f"needs envs that end their episodes together; {args.env_id}'s do not (separate runs)",
        )
    ratio = getattr(args, "ratio", "step")
    require(
        ratio == "step" or args.num_minibatches == 1,
        "num_seeds",
        f"with --ratio {ratio} needs --num-minibatches 1 (the whole rollout filtered at once), "
        f"got {args.num_minibatches}",
    )
    need, have = memory_estimate(args), available_memory()
    require(
        need <= have,
        "num_seeds",
        f"{S}: about {need / 2**30:.1f} GiB needed (estimate), {have / 2**30:.1f} GiB "
        "available; use fewer seeds or split them over runs",
    )


def memory_estimate(args) -> int:
    """Bytes a population of args.num_seeds needs at most, estimated before anything is
    allocated: per seed the parameters (policy and critic, reference, gradient, Adam's two
    moments, checkpoint copies), the rollout, the activations of one forward and backward
    pass, and its simulator envs (ENV_BYTES each)."""
    import envs
    from envs import bandits, split_id

    backend, name = split_id(args.env_id)
    if backend == "bandit":
        env = bandits.make(name, 1)
        obs_space, space = env.single_observation_space, env.single_action_space
        length, env_bytes = getattr(env, "length", 1), 0
        env.close()
    else:
        (obs_space, space), length = envs.spaces(args.env_id), 1
        env_bytes = BRAX_ENV_BYTES if backend == "brax" else ENV_BYTES
    obs_dim = int(math.prod(obs_space.shape))
    out = int(space.n) if hasattr(space, "n") else 2 * int(math.prod(space.shape))
    # a rollout: an episode per env (group methods), or --num-steps steps (actor-critic)
    rows = int(getattr(args, "num_steps", length)) * args.num_envs
    nets = [[obs_dim, *args.hidden_sizes, out]]
    if hasattr(args, "critic_hidden_sizes"):  # an actor-critic: the critic in the same row
        nets.append([obs_dim, *(args.critic_hidden_sizes or args.hidden_sizes), 1])
    params = sum((a + 1) * b for sizes in nets for a, b in zip(sizes[:-1], sizes[1:]))
    per_row = 4 * (6 * obs_dim + 8 * sum(args.hidden_sizes) + 10 * out + 32)
    per_seed = 4 * 12 * params + rows * per_row + 8192  # + a generator's state
    per_seed += args.num_envs * env_bytes
    return BASE_BYTES + args.num_seeds * per_seed


def available_memory() -> int:
    """MemAvailable of /proc/meminfo in bytes (physical memory where that is not readable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def group_run(args):
    """The run of a group method: a PopulationRun with --num-seeds, else a GroupRun."""
    if getattr(args, "num_seeds", None) is None:
        from controlrl.group_training import GroupRun

        return GroupRun(args)
    return PopulationRun(args)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x[mask].mean(); inside a population's vmapped loss (no data-dependent shapes there) the
    sum of the masked values over their count, the same number up to rounding."""
    if torch._C._functorch.is_batchedtensor(x) or torch._C._functorch.is_batchedtensor(mask):
        return torch.where(mask, x, 0.0).sum() / mask.sum()
    return x[mask].mean()


class _Method(nn.Module):
    """Calls a method of `policy`, whose parameters functional_call swaps for one seed's; with
    one_row, every row of the observations is the first (the bandit's constant observation):
    the network runs on that row and its outputs are broadcast."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, name: str, one_row: bool, *args):
        policy = self.policy
        if not one_row:  # a dotted name: a submodule's method (critic.value_and_median)
            return attrgetter(name)(policy)(*args)
        cls, obs = type(policy), args[0]

        def broadcast(out):
            if isinstance(out, tuple):
                return tuple(broadcast(t) for t in out)
            if out.ndim < obs.ndim:  # not per row (a state-independent log-std)
                return out
            return out.expand(*obs.shape[:-1], *out.shape[obs.ndim - 1 :])

        def dist_params(x):
            return broadcast(cls.dist_params(policy, x[..., :1, :]))

        if name == "critic":  # an actor-critic's V(s) (population_actor_critic.py)
            return policy.critic(obs[..., :1, :]).expand(obs.shape[:-1])
        if name in ("dist_params", "sample_inputs"):
            return broadcast(getattr(cls, name)(policy, obs[..., :1, :]))
        if name == "log_prob_entropy" and issubclass(cls, CategoricalPolicy):
            return _categorical_one_row(policy, obs, *args[1:])
        policy.dist_params = dist_params  # what log_prob_entropy calls, for this call only
        try:
            return getattr(policy, name)(*args)
        finally:
            del policy.dist_params


def _categorical_one_row(policy, obs, actions, *rest):
    """CategoricalPolicy.log_prob_entropy where every row of obs [..., B, d] is the first: the
    log-probabilities of that row [..., K], gathered at actions [..., B] (a backward into K
    entries, not B x K), and the entropy of that row (computed once) broadcast over the B."""
    cls = type(policy)
    row = cls.dist_params(policy, obs[..., :1, :])  # [..., 1, K]
    logp = row[..., 0, :].gather(-1, actions.long())
    policy.dist_params = lambda x: row  # log_prob_entropy's entropy of the one row
    try:
        _, entropy = cls.log_prob_entropy(policy, obs[..., :1, :], actions[..., :1], *rest)
    finally:
        del policy.dist_params
    return logp, entropy.expand(logp.shape)


class PopulationPolicy(nn.Module):
    """S policies of one architecture as one [S, P] parameter (row k: seed k's parameters in
    the order of template.parameters()); the methods the group path calls (sample, mode,
    dist_params, log_prob_at, log_prob_entropy) take and return seed-batched tensors [S, ...].
    Inside a population's vmapped loss (bound to one seed's row) they are that seed's policy."""

    def __init__(self, template: nn.Module, flat: torch.Tensor, constant_obs: bool = False) -> None:
        super().__init__()
        named = list(template.named_parameters())
        self.names = [n for n, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.num_seeds = flat.shape[0]
        self.num_params = flat.shape[1]  # P; the rows of flat may be padded beyond it
        if self.num_seeds > 1 and self.num_params % ROW_FLOATS:  # zero columns, never used
            flat = torch.cat(
                [flat, flat.new_zeros(self.num_seeds, -self.num_params % ROW_FLOATS)], 1
            )
        self.flat = nn.Parameter(flat)
        self.flat.grad = torch.zeros_like(flat)
        # not registered as submodules: flat is the one parameter
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "_caller", _Method(template))
        self.constant_obs = constant_obs and self.num_seeds > 1
        self.generators: list[torch.Generator] = []
        self.seed_pool = SeedPool()
        self._bound: torch.Tensor | None = None  # a seed's row, in a vmapped loss
        self._plain = False  # S = 1 in a loss: the template's own call, unbatched tensors
        # every parameter stacked over seeds [S, *shape] as views of flat (their gradients views
        # of its gradient): vmap slices them per seed, backward copies into flat.grad
        self._leaves: list[torch.Tensor] = []
        offset = 0
        for (_, p), shape, n in zip(named, self.shapes, self.sizes):
            cols = slice(offset, offset + n)
            if self.num_seeds == 1:  # the template itself is the seed, as flat Adam's views
                p.data = self.flat.data[0, cols].view_as(p)
                p.grad = self.flat.grad[0, cols].view_as(p)
            else:
                leaf = nn.Parameter(torch.empty(0))
                leaf.data = self.flat.data[:, cols].view(-1, *shape)
                leaf.grad = self.flat.grad[:, cols].view(-1, *shape)
                self._leaves.append(leaf)
            offset += n

    @classmethod
    def build(cls, policies: list[nn.Module], constant_obs: bool = False) -> PopulationPolicy:
        """Stack the parameters of S policies of one architecture (policies[0] the template)."""
        rows = [torch.cat([p.detach().reshape(-1) for p in m.parameters()]) for m in policies]
        return cls(policies[0], torch.stack(rows), constant_obs)

    def __deepcopy__(self, memo) -> PopulationPolicy:
        new = PopulationPolicy(
            copy.deepcopy(self.template), self.params().clone(), self.constant_obs
        )
        new.constant_obs = self.constant_obs
        new.generators = self.generators
        new.seed_pool = self.seed_pool
        new.flat.requires_grad_(self.flat.requires_grad)
        return new

    def requires_grad_(self, requires_grad: bool = True) -> PopulationPolicy:
        self.flat.requires_grad_(requires_grad)
        self.template.requires_grad_(requires_grad)
        for leaf in self._leaves:
            leaf.requires_grad_(requires_grad)
        return self

    def population_adam(self, lr: float, eps: float) -> PopulationAdam:
        """controlrl.update.adam for a population: one Adam per seed."""
        return PopulationAdam(self, lr, eps)

    # -- calling the template with one seed's or every seed's parameters
    def _seed_call(self, params: tuple[torch.Tensor, ...], name: str, *args):
        named = {"policy." + n: p for n, p in zip(self.names, params)}
        return functional_call(self._caller, named, (name, self.constant_obs, *args))

    def per_seed(self, name: str, *args, **constants):
        """template.<name>(*args, **constants) of every seed: args [S, ...] -> outputs [S, ...];
        bound to one seed (in a vmapped loss), that seed's call."""
        if self._plain:
            return attrgetter(name)(self.template)(*args, *constants.values())
        if self._bound is not None:
            return self._seed_call(self._bound, name, *args, *constants.values())
        if self.num_seeds == 1:  # the plain call: the single run's ops
            out = attrgetter(name)(self.template)(*(a[0] for a in args), *constants.values())
            return _tree(out, lambda t: t.unsqueeze(0))
        if self.constant_obs:
            _check_constant(args[0])
        fn = functools.partial(self._call_row, name, tuple(constants.values()))
        return vmap(fn)(tuple(self._leaves), *args)

    def _call_row(self, name, constants, row, *args):
        return self._seed_call(row, name, *args, *constants)

    def bound_losses(self, loss_fn, mb: dict[str, torch.Tensor], idx: torch.Tensor):
        """loss_fn(mb_k, idx_k) of every seed k: (losses [S], stats {name: [S]})."""
        if self.num_seeds == 1:
            self._plain = True
            try:
                loss, stats = loss_fn({k: v[0] for k, v in mb.items()}, idx[0])
            finally:
                self._plain = False
            return loss.unsqueeze(0), {k: torch.as_tensor(v).unsqueeze(0) for k, v in stats.items()}
        if self.constant_obs:
            _check_constant(mb["obs"])

        def one(params, mb, idx):
            self._bound = params
            try:
                loss, stats = loss_fn(mb, idx)
            finally:
                self._bound = None
            return loss, {k: torch.as_tensor(v) for k, v in stats.items()}

        return vmap(one)(tuple(self._leaves), mb, idx)

    def backward(self, loss: torch.Tensor) -> None:
        """flat.grad = the gradient of loss (every seed's row its own seed's gradient)."""
        if self.num_seeds == 1:  # the single run's ops: into the template's gradient views
            self.flat.grad.zero_()
            loss.backward()
            return
        # autograd.grad, each gradient copied once into its view of flat.grad: no zeroing of
        # flat.grad, no accumulation into it
        grads = torch.autograd.grad(loss, self._leaves, allow_unused=True)
        for leaf, grad in zip(self._leaves, grads):
            if grad is None:
                leaf.grad.zero_()
            else:
                leaf.grad.copy_(grad)

    # -- the policy interface of the group path, seed-batched
    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions of obs [S * N, d] (seed-major rows), each seed's drawn from its generator."""
        S, cls = self.num_seeds, type(self.template)
        x = obs.reshape(S, -1, *obs.shape[1:])
        N = x.shape[1]
        if self.constant_obs:  # one row per seed, broadcast against the noise below
            _check_constant(x)
            x = x[:, :1]
        inputs = self.per_seed("sample_inputs", x)
        first = inputs[0] if isinstance(inputs, tuple) else inputs  # [S, N or 1, ...]
        # a per-seed parameter among the inputs (a log-std [S, a]) broadcasts over the rows
        inputs = _tree(inputs, lambda t: t if t.ndim == first.ndim else t.unsqueeze(1))
        actions = cls.sample_with(inputs, self.noise((S, N, *first.shape[2:]), first.dtype))
        return actions.reshape(obs.shape[0], *actions.shape[2:])

    def noise(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """One step's sampling noise [S, N, ...] (shape), each seed's row drawn from its
        generator by the template's draw_noise."""
        noise = torch.empty(shape, dtype=dtype)
        cls, generators = type(self.template), self.generators

        def draw(k: int) -> None:  # each seed's draws from its own stream
            cls.draw_noise(noise[k], generators[k])

        self.seed_pool.map(draw, range(shape[0]))
        return noise

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic actions of obs [S * N, d] (seed-major rows)."""
        x = obs.reshape(self.num_seeds, -1, *obs.shape[1:])
        out = self.per_seed("mode", x)
        return out.reshape(obs.shape[0], *out.shape[2:])

    def dist_params(self, obs: torch.Tensor):
        """Distribution parameters of obs [S, B, d]."""
        return self.per_seed("dist_params", obs)

    def log_prob_at(self, params, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) [S, B] from dist_params (elementwise: the template's own)."""
        return self.template.log_prob_at(params, actions)

    def log_prob_entropy(self, obs, actions, entropy_grad: bool = True):
        """log pi(a|s) and entropy [S, B] (one seed's [B] inside a vmapped loss)."""
        return self.per_seed("log_prob_entropy", obs, actions, entropy_grad=entropy_grad)

    # -- checkpoints: every parameter stacked over seeds, under the template's names
    def state_dict(self, *args, **kwargs) -> dict[str, torch.Tensor]:
        out, offset = {}, 0
        for name, shape, n in zip(self.names, self.shapes, self.sizes):
            out[name] = self.flat.detach()[:, offset : offset + n].reshape(-1, *shape).clone()
            offset += n
        return out

    def load_state_dict(self, state: dict[str, torch.Tensor], strict: bool = True):
        rows = [state[name].reshape(self.num_seeds, -1) for name in self.names]
        with torch.no_grad():  # in place: the views and Adam's rows stay
            self.params().copy_(torch.cat(rows, 1))

    def params(self) -> torch.Tensor:
        """The parameters [S, P] (flat without its padding columns; a view)."""
        return self.flat.detach()[:, : self.num_params]


def _tree(out, fn):
    return tuple(fn(t) for t in out) if isinstance(out, tuple) else fn(out)


def _check_constant(obs: torch.Tensor) -> None:
    # every row equal within each seed: max == min per seed and feature (NaN fails), ~8x
    # cheaper than comparing every row against the first
    if not bool((obs.amax(1) == obs.amin(1)).all()):
        raise ValueError("constant_obs: the observations of a seed differ across rows")


class PopulationObsNormalizer:
    """One observation normaliser per seed, as one ObsNormalizer over (seed, feature)
    statistics: the rows [S * n, d] of a population's envs (seed-major) become [n, S, d], so
    that every seed's statistics fold in its own envs' rows, in the single run's arithmetic."""

    def __init__(self, num_seeds: int, shape: tuple[int, ...]) -> None:
        self.num_seeds = num_seeds
        self.inner = ObsNormalizer((num_seeds, *shape))

    def __call__(
        self, obs: np.ndarray, update: bool = True, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Normalise rows [S * n, d]; fold them into each seed's statistics unless not update."""
        S = self.num_seeds
        if obs.shape[0] % S:
            raise ValueError(f"{obs.shape[0]} rows do not split over {S} seeds")
        x = obs.reshape(S, -1, *obs.shape[1:]).swapaxes(0, 1)  # [n, S, d] view
        y = self.inner(x, update=update).swapaxes(0, 1).reshape(obs.shape)
        if out is None:
            return y
        out[...] = y
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Statistics [S, d] as tensors."""
        return self.inner.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore statistics."""
        self.inner.load_state_dict(state)


class PopulationCollector(GroupCollector):
    """GroupCollector over a population's S * N bandit envs: every seed reset with its own seed,
    its rows normalised by its own statistics; returns GroupRollouts with a seed axis."""

    def __init__(self, envs, group_size: int, obs_normalizer, num_seeds: int) -> None:
        super().__init__(envs, group_size, obs_normalizer, max_steps=1)
        self.num_seeds = num_seeds

    def reset_seeds(self, seed):
        """The list of per-seed reset seeds, as given."""
        return list(seed)

    def _write_obs(self, obs: np.ndarray, alive: np.ndarray, row: np.ndarray) -> None:
        if alive.any() and not alive.all():  # bandit episodes have one length: never here
            raise RuntimeError("a population's envs must step in lockstep")
        super()._write_obs(obs, alive, row)

    def collect(self, act, seed) -> GroupRollout:
        """One rollout of every seed (seed: the S reset seeds); obs [S, T, N, ...]."""
        r = super().collect(act, seed)
        S, T = self.num_seeds, r.valid.shape[0]

        def seed_major(x: np.ndarray) -> np.ndarray:  # [T, S * N, ...] -> [S, T, N, ...]
            return np.ascontiguousarray(x.reshape(T, S, -1, *x.shape[2:]).swapaxes(0, 1))

        valid = r.valid.reshape(T, S, -1)
        ended = r.ended.reshape(T, S, -1)
        if not ((valid == valid[:, :1]).all() and (ended == ended[:, :1]).all()):
            raise RuntimeError("a population's envs must step in lockstep")
        return GroupRollout(
            obs=seed_major(r.obs),
            actions=seed_major(r.actions),
            valid=valid[:, 0].copy(),
            ended=ended[:, 0].copy(),
            returns=r.returns.reshape(S, -1),
            lengths=r.lengths.reshape(S, -1),
            group_size=r.group_size,
            lead=(S,),
        )


class PopulationSession(Session):
    """What every population run shares, whatever its data path: the seeds, their generators
    (each continuing its seed's torch stream after its models' initialisation), one metrics.csv
    row per seed, aggregate.csv and TensorBoard of the means, checkpoints, and the evaluation
    of every seed at once."""

    background_checkpoints = True  # every seed's state: tens of MB a checkpoint at S = 1000

    def __init__(self, args, steps_per_iteration: int) -> None:
        from envs import split_id

        super().__init__(args, steps_per_iteration=steps_per_iteration)
        S = args.num_seeds
        self.seeds = [args.seed + k for k in range(S)]
        self.bandit = split_id(args.env_id)[1]
        self.generators: list[torch.Generator] = []
        self.aggregate: _CsvLog | None = None
        self.t_crit = _t_critical(S) if S >= CI_MIN_SEEDS else None

    def seeded_models(self, build) -> list[nn.Module]:
        """build() of every seed, called after torch.manual_seed(seed) as its single run calls
        it, and every seed's torch generator, continuing that seed's stream from there."""
        models = []
        threads = torch.get_num_threads()
        if len(self.seeds) > 1:  # S small initialisations (a QR each): one thread is fastest
            torch.set_num_threads(1)
        try:
            for seed in self.seeds:
                # torch.manual_seed's CPU part (its lazy accelerator seeding costs ~3 ms a call)
                torch.default_generator.manual_seed(seed)
                models.append(build())
                generator = torch.Generator()
                generator.set_state(torch.get_rng_state())
                self.generators.append(generator)
        finally:
            torch.set_num_threads(threads)
        torch.default_generator.manual_seed(self.args.seed)
        return models

    def population_policy(self, models: list[nn.Module], constant: bool = True) -> PopulationPolicy:
        """The seeds' models stacked into one PopulationPolicy drawing from their generators;
        evaluated on one row per seed where the bandit's observation is constant, unless not
        constant (rows normalised at different steps differ)."""
        constant = constant and bool(getattr(self.envs, "constant_observation", False))
        policy = PopulationPolicy.build(models, constant_obs=constant)
        policy.generators = self.generators
        return policy

    def start(self, **stateful):
        iterations = super().start(**stateful)
        path = self.run_dir / "aggregate.csv"
        if self.restart_from_scratch:
            path.unlink(missing_ok=True)
        if self.step > 0:
            truncate_csv(path, self.step)
        self.aggregate = _CsvLog(path)
        return iterations

    def end_iteration(self, iteration, metrics, timing=None, evaluate=None) -> None:
        """One metrics.csv row per seed, one aggregate.csv row (and TensorBoard), timing.csv;
        an evaluation of every seed when due; a checkpoint when due."""
        S = len(self.seeds)
        columns = {k: _column(v, S) for k, v in metrics.items()}
        columns["eval/return"] = [float("nan")] * S
        if self.eval_due() and evaluate is not None:
            columns["eval/return"] = evaluate().tolist()
            self.next_eval += self.args.eval_every
        logger = self.logger
        # controlrl.logger's _fmt of Python numbers (what _column gives) is their repr
        text = [list(map(repr, column)) for column in columns.values()]
        if logger.metrics.fields is None:  # the header, with the first row
            logger.metrics.write(
                {
                    "step": self.step,
                    "seed": self.seeds[0],
                    **dict(zip(columns, [c[0] for c in columns.values()])),
                }
            )
            text = [t[1:] for t in text]
        seeds = self.seeds[S - len(text[0]) :]
        lines = [f"{self.step},{s}," + ",".join(r) for s, r in zip(seeds, zip(*text))]
        if lines:  # one write for every seed's row
            logger.metrics.file.write("\n".join(lines) + "\n")
            logger.metrics.file.flush()
        row = {"step": self.step, "seeds": S}
        for name, column in columns.items():
            mean, lo, hi = self.interval(np.asarray(column, np.float64))
            row |= {name: mean, f"{name}_lo": lo, f"{name}_hi": hi}
            if logger.writer is not None and mean == mean:
                logger.writer.add_scalar(name, mean, self.step)
        self.aggregate.write(row)
        if timing:
            logger.timing.write({"step": self.step, **timing})
            if logger.writer is not None:
                for name, value in timing.items():
                    logger.writer.add_scalar(name, value, self.step)
        logger.bar.update(self.step - logger.step)
        logger.step = self.step
        logger.bar.set_postfix({"return": f"{row['train/episode_return']:.4g}"}, refresh=False)
        if iteration % self.args.checkpoint_every == 0 or iteration == self.num_iterations:
            self.save_checkpoint(iteration)

    def interval(self, x: np.ndarray) -> tuple[float, float | str, float | str]:
        """Mean over seeds and its 95% t-interval ('' below CI_MIN_SEEDS seeds)."""
        mean = float(x.mean())
        if self.t_crit is None:
            return mean, "", ""
        half = self.t_crit * float(x.std(ddof=1)) / math.sqrt(x.size)
        return mean, mean - half, mean + half

    def finish(self, evaluate) -> float:
        """Every seed's final evaluation into final_eval.json; returns their mean."""
        with rundir.on_disk_fault(self.run_dir, self.release):
            self.wait_checkpoint()  # on disk before final_eval.json says the run is done
        per_seed = evaluate()
        final = float(per_seed.mean())
        (self.run_dir / "final_eval.json").write_text(
            json.dumps(
                {
                    "step": self.step,
                    "eval_return_mean": final,
                    "seeds": self.seeds,
                    "eval_return_per_seed": per_seed.tolist(),
                }
            )
            + "\n"
        )
        self.write(
            f"final evaluation of {len(self.seeds)} seeds ({self.args.eval_episodes} episodes "
            f"each, normaliser frozen): mean {final:.3f}   run dir: {self.run_dir}"
        )
        self.logger.close()
        self.aggregate.file.close()
        return final

    def evaluate(self, policy: PopulationPolicy) -> np.ndarray:
        """controlrl.evaluate.evaluate for every seed at once (evaluate_seeds), one bandit env
        per seed."""
        from envs import bandits

        envs = bandits.make_population(self.bandit, len(self.seeds), 1)
        episodes = self.args.eval_episodes
        return evaluate_seeds(envs, self.seeds, policy, self.obs_normalizer, episodes)


def evaluate_seeds(envs, seeds, policy, obs_normalizer, episodes: int) -> np.ndarray:
    """controlrl.evaluate.evaluate of every seed at once: one env per seed in `envs`, reset with
    eval_seed(seed), `episodes` deterministic episodes each (an env that has its episodes steps on
    until the others have theirs, uncounted), normaliser frozen; the mean return of each seed
    [S]. Closes `envs`."""
    from controlrl.evaluate import episode_returns  # it imports the env backends

    obs, _ = envs.reset(seed=[eval_seed(s) for s in seeds])
    returns: list[list[float]] = [[] for _ in seeds]

    def enough() -> bool:
        return min(len(r) for r in returns) >= episodes

    episode_returns(envs, obs, policy.mode, obs_normalizer, enough, returns)
    envs.close()
    return np.array([np.asarray(r[:episodes]).mean() for r in returns])


class PopulationRun(PopulationSession):
    """GroupRun's path for S seeds at once (see the module docstring): a PopulationSession
    with the group collector."""

    def __init__(self, args) -> None:
        from envs import bandits

        super().__init__(args, steps_per_iteration=args.num_envs)
        S = args.num_seeds
        self.num_iterations = -(-args.total_timesteps // args.num_envs)
        self.envs = bandits.make_population(self.bandit, S, args.num_envs, args.group_size)
        self.obs_space = self.envs.single_observation_space
        self.act_space = self.envs.single_action_space
        self.obs_normalizer = (
            PopulationObsNormalizer(S, self.obs_space.shape) if args.norm_obs else None
        )
        self.collector = PopulationCollector(self.envs, args.group_size, self.obs_normalizer, S)

    def make_policy(self, hidden_sizes: tuple[int, ...]) -> PopulationPolicy:
        """Every seed's policy, initialised as its single run's (after torch.manual_seed(seed)),
        and every seed's torch generator, continuing that seed's stream from there."""
        models = self.seeded_models(
            lambda: make_policy(self.obs_space, self.act_space, hidden_sizes)
        )
        return self.population_policy(models)

    def train(
        self,
        update_fn,
        policy: PopulationPolicy,
        ratio_eps: diagnostics.Eps = None,
        sample=None,
        **stateful,
    ) -> float:
        """GroupRun.train for every seed at once (sample: seed-batched, as policy.sample);
        returns the mean final evaluation."""
        stateful["generators"] = SeedGenerators(self.generators)
        if self.obs_normalizer is not None:
            stateful["obs_normalizer"] = self.obs_normalizer
        total, S = self.args.total_timesteps, len(self.seeds)
        for iteration in self.start(policy=policy, **stateful):
            if self.step >= total:
                break
            timer = Timer()
            seeds = [reset_seed(s, iteration) for s in self.seeds]
            rollout = self.collector.collect(sample or policy.sample, seeds)
            steps = int(rollout.lengths[0].sum())
            self.step += steps
            old_logp, entropy, old_params = rollout.log_probs(policy)  # [S, T, N]
            timer.lap("rollout_s")
            with self.guard():
                stats = update_fn(rollout, old_logp)
            valid = rollout.valid.reshape(-1)
            if valid.all():  # every row (a bandit's one-step episodes): no copies
                rows = slice(None)
            else:
                rows = torch.from_numpy(np.flatnonzero(valid))
            shift = diagnostics.shift_stats(
                policy,
                rollout.flat_obs()[:, rows],
                rollout.flat_actions()[:, rows],
                old_logp.flatten(-2)[:, rows],
                _tree(old_params, lambda t, rows=rows: t[:, rows]),
                ratio_eps,
            )
            metrics = {
                "train/episode_return": rollout.returns.mean(-1),
                "train/episode_length": rollout.lengths.mean(-1),
                "train/episodes": np.full(S, rollout.returns.shape[1]),
                "train/entropy": entropy.flatten(-2)[:, rows].mean(-1),
                "train/zero_variance_frac": zero_variance_mask(rollout.scores()).float().mean(-1),
                **{f"train/{k}": v for k, v in {**stats, **shift}.items()},
            }
            timer.lap("update_s")
            self.end_iteration(
                iteration, metrics, timer.timing(steps * S), lambda: self.evaluate(policy)
            )
            if self.step >= total:
                if iteration % self.args.checkpoint_every and iteration != self.num_iterations:
                    self.save_checkpoint(iteration)  # the last iteration always checkpoints
                break
        final = self.finish(lambda: self.evaluate(policy))
        self.envs.close()
        return final


def _column(values, S: int) -> list:
    """A metric of every seed as a list of Python numbers (a scalar: the same for all)."""
    if isinstance(values, torch.Tensor):
        values = values.detach()
        values = values.double() if values.is_floating_point() else values
        values = values.numpy()
    values = np.asarray(values)
    if values.ndim == 0:
        values = np.full(S, values.item())
    return values.tolist()


def _t_critical(seeds: int) -> float:
    """The 97.5% quantile of Student's t with seeds - 1 degrees of freedom (scipy.stats.t.ppf's
    own function, without scipy.stats's import: ~1 s of a population's start)."""
    from scipy.special import stdtrit

    return float(stdtrit(seeds - 1, 0.975))
