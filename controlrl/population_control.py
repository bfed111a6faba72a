"""Population runs of the actor-critic path on continuous control: S seeds of algos/ppo.py (or
spo.py, bpo.py) on a Gymnasium MuJoCo or classic-control id, or an envpool: id, in one process,
the seed a batch dimension (PureJaxRL's `vmap(train)(keys)`, purejaxrl/ppo_continuous_action.py
make_train, on CPU with torch.func).

    python algos/ppo.py --env-id HalfCheetah-v5 --num-seeds 16 --seed 0

Seed k of a population is the run `--seed s + k` alone: its actor and critic are initialised as
that run's (controlrl/population_actor_critic.py), and its N envs are envs k * N, ..., k * N +
N - 1 of one vector env of S * N, each reset with the seed its run gives it (reset_seed(s + k,
iteration) + n, as a vector env seeds env n of a single run); its observation normaliser,
reward scaler, Adam state, learning rate and torch stream (action noise, minibatch shuffles)
are its own. Episodes end at different steps in different envs: every ended episode is
recorded with its seed, a truncated one bootstraps from V(final observation) of its seed's
critic, normalised by its seed's statistics. GAE runs per env column, advantages are
normalised per seed and minibatch, evaluation runs one env per seed (reset with eval_seed(s +
k)) with the seed's normaliser frozen.

The S * N envs: a Gymnasium id steps them in one sync vector env by default (--vectorization
async: a process per env; on two cores sync is the faster, see paper_figures/out/
bench_control_population_envs.csv); an envpool: id in EnvPool's C++ thread pool, one pool per
run of consecutive env seeds (one pool for N = 1, S pools of N envs otherwise; envs/envpool.py).

Exactness: S = 1 is the single run to the byte. For S > 1 the rollout's forward
(ControlPopulationPolicy) gives every seed the bits of its own F.linear, so with one env per
seed, seed k samples its single run's actions to the bit over the first rollout; with N > 1
envs MKL's kernel for a matmul of a few rows rounds by the input's memory alignment (the single
run's own rows differ by their place in its buffer), so the actions agree within float rounding
(measured: 1.2e-7 at most). The update's loss arithmetic runs vmapped (reductions over one
seed's row of a tensor), its actor and ValueNet as batched matmuls on the stacked parameters
(the bits of vmap's own batched F.linear): parameters agree within float rounding. A Gaussian
policy's action noise for a rollout is drawn up front, one call per seed, where that takes the
per-step draws' numbers (ControlPopulationPolicy.draw_rollout_noise).

Resume: the envs mid-episode come back where envs.state captures them (Gymnasium MuJoCo and
classic control, sync), so a resumed population continues the uninterrupted one bit for bit;
elsewhere every seed starts fresh episodes from its reset seeds at the resumed iteration, as its
single run does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch._C import _functorch as functorch

import envs
from controlrl.nets import CategoricalPolicy, GaussianPolicy, ValueNet
from controlrl.population import PopulationObsNormalizer, PopulationPolicy, _tree, evaluate_seeds
from controlrl.population_actor_critic import PopulationActorCriticRun
from controlrl.rollout import Collector, Episode
from controlrl.seeding import reset_seed


def population_env_seeds(seeds: list[int], num_envs: int, iteration: int) -> list[int]:
    """The reset seed of each of a population's S * N envs (seed-major): env n of seed s is
    reset as env n of the run --seed s alone, with reset_seed(s, iteration) + n."""
    return [reset_seed(s, iteration) + n for s in seeds for n in range(num_envs)]


@dataclass
class SeedEpisode(Episode):
    """An Episode of a population, with the index of the seed whose env ran it."""

    seed: int = 0


def normalize_rows_of_seed(normalizer, obs: np.ndarray, k: int) -> np.ndarray:
    """Rows obs [B, d] of seed k's envs normalised by seed k's frozen statistics, in
    ObsNormalizer's arithmetic (what the single run applies to a truncated episode's final
    observation); a plain normaliser (one seed) is called as the single run calls it."""
    if not isinstance(normalizer, PopulationObsNormalizer) or normalizer.num_seeds == 1:
        return normalizer(obs, update=False)
    inner = normalizer.inner
    out = np.subtract(obs, inner._mean[k])
    np.multiply(out, inner._inv_std[k], out=out)
    np.maximum(out, inner._low[k], out=out)
    return np.minimum(out, inner._high[k], out=out)


class ControlCollector(Collector):
    """rollout.Collector over a population's S * N envs (seed-major): each ended episode is a
    SeedEpisode, and a truncated one's final observation is normalised by its seed's statistics
    for the bootstrap."""

    def __init__(self, envs_, obs_normalizer, reward_scaler, as_terminal, num_seeds: int) -> None:
        super().__init__(envs_, obs_normalizer, reward_scaler, as_terminal)
        self.envs_per_seed = self.num_envs // num_seeds

    def _episode_ended(self, buffer, episodes, t: int, n: int, ret: float, final_obs) -> None:
        k = n // self.envs_per_seed
        length = self._steps - int(self._ep_start[n])
        episodes.append(SeedEpisode(ret, length, self.global_step, k))
        self._ep_start[n] = self._steps
        if final_obs is not None:  # truncated: bootstrap from the real final obs
            final = np.asarray(final_obs, np.float32)[None]
            buffer.trunc_index.append((t, n))
            if self.obs_normalizer is not None:
                final = normalize_rows_of_seed(self.obs_normalizer, final, k)
            buffer.trunc_obs.append(final[0])


class ControlPopulationPolicy(PopulationPolicy):
    """A PopulationPolicy whose no-grad calls of every seed at once (the rollout's actions, the
    evaluation's modes, the values and old log-probabilities after a rollout) run the MLPs on
    the stacked parameters directly instead of vmap over functional_call (~10x less per-call
    overhead on every env step). Each Linear of every seed gives the bits of that seed's own
    F.linear: a layer runs as one torch.baddbmm over the seeds where a probe of its shape
    (batch rows, in, out) finds baddbmm bit-identical to the per-seed F.linear (MKL picks its
    kernel by shape: measured identical at CleanRL's 64 units, ~1 ulp apart for a narrow
    output layer or 16 units), else as each seed's F.linear in turn. Inside the vmapped loss,
    the actor's and ValueNet's calls run on the whole [S, ...] tensors with the stacked
    parameters too (_in_loss); other networks (bpo.py's MedianCritic) and calls with gradients
    outside a loss are PopulationPolicy's vmap over functional_call."""

    HEADS = {"mean": "mean", "logits": "logits", "critic": "critic.net"}

    def __init__(self, template, flat, constant_obs: bool = False) -> None:
        super().__init__(template, flat, constant_obs)
        self._stacked = dict(zip(self.names, self._leaves))  # name -> [S, *shape] view
        self._batched_exact: dict[tuple[int, int, int], bool] = {}
        self._plans: dict[str, list[tuple]] = {}
        self._batchable_names: dict[str, bool] = {}
        self._rollout_noise: torch.Tensor | None = None  # [S, T, N * a], draw_rollout_noise
        self._noise_step = 0

    def _batches_exactly(self, rows: int, n_in: int, n_out: int) -> bool:
        """Whether baddbmm gives every seed's F.linear bits at this shape (probed once, on
        draws from a private generator: the seeds' streams are untouched)."""
        key = (rows, n_in, n_out)
        if key not in self._batched_exact:
            g = torch.Generator().manual_seed(0)
            S = self.num_seeds
            x = torch.randn(S, rows, n_in, generator=g)
            w, b = torch.randn(S, n_out, n_in, generator=g), torch.randn(S, n_out, generator=g)
            alone = torch.stack([F.linear(x[k], w[k], b[k]) for k in range(S)])
            batched = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
            self._batched_exact[key] = torch.equal(batched, alone)
        return self._batched_exact[key]

    def draw_rollout_noise(self, steps: int, num_envs: int) -> bool:
        """Every seed's action noise for the next `steps` calls of sample, drawn now in one call
        per seed where that takes the per-step draws' numbers from the seed's stream: a
        Gaussian policy whose per-step noise (N x action elements) has fewer than 16 elements,
        which torch's normal_ draws one by one (its serial path; 16 or more contiguous
        elements take the vectorised path); a [steps, N * a] view with a padding column is
        never contiguous, so it is drawn one by one too, in the per-step order. Whether it
        drew (else every step draws its own, as before)."""
        self._rollout_noise, self._noise_step = None, 0
        act = self.template._parameters.get("log_std")
        width = num_envs * (act.numel() if act is not None else 0)
        if type(self.template).draw_noise is not GaussianPolicy.draw_noise or not 0 < width < 16:
            return False
        noise = torch.empty(self.num_seeds, steps, width + 1)[..., :width]
        generators = self.generators

        def draw(k: int) -> None:
            noise[k].normal_(generator=generators[k])

        self.seed_pool.map(draw, range(self.num_seeds))
        self._rollout_noise = noise
        return True

    def noise(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """The next step of the rollout's pre-drawn noise (draw_rollout_noise), else
        PopulationPolicy's per-step draws."""
        pre = self._rollout_noise
        if pre is None:
            return super().noise(shape, dtype)
        if self._noise_step == pre.shape[1] or dtype != pre.dtype:
            raise RuntimeError(f"a sample beyond the rollout's pre-drawn {pre.dtype} noise")
        step = pre[:, self._noise_step].reshape(shape)  # a copy: its rows are apart
        self._noise_step += 1
        return step

    def end_rollout_noise(self) -> None:
        """Drop the rollout's pre-drawn noise, every step of it used (else the seeds' streams
        would have run ahead of their single runs')."""
        pre, used = self._rollout_noise, self._noise_step
        self._rollout_noise = None
        if pre is not None and used != pre.shape[1]:
            raise RuntimeError(f"{used} of {pre.shape[1]} pre-drawn noise steps used")

    def _layers(self, head: str) -> list[tuple]:
        """The Sequential at `head` as (kind, weights [S, out, in], biases [S, out], each seed's
        weights, each seed's biases, the weights and biases with their gradients): views of the
        parameters, built once (the parameters are only ever written in place)."""
        if head not in self._plans:
            plan = []
            for name, layer in self.template.get_submodule(head)._modules.items():
                if isinstance(layer, torch.nn.Linear):
                    w = self._stacked[f"{head}.{name}.weight"]
                    b = self._stacked[f"{head}.{name}.bias"]
                    wd, bd = w.detach(), b.detach()
                    plan.append(("linear", wd, bd, wd.unbind(0), bd.unbind(0), w, b))
                elif isinstance(layer, torch.nn.Tanh | torch.nn.ReLU):
                    plan.append((type(layer).__name__.lower(),))
                else:
                    raise TypeError(f"no batched forward for {type(layer).__name__}")
            self._plans[head] = plan
        return self._plans[head]

    def _mlp(self, head: str, x: torch.Tensor) -> torch.Tensor:
        """The Sequential at `head` of every seed on x [S, B, d] -> [S, B, out]; with gradients
        (a loss), every layer one bmm on the stacked parameters plus the bias, as vmap's batching
        rule for F.linear computes it: its bits, forward and backward (baddbmm, the bias inside
        MKL's blocked sum, rounds otherwise from 256 inputs on)."""
        grad = torch.is_grad_enabled()
        for kind, *params in self._layers(head):
            if kind == "tanh":  # in place on a fresh output, as nets.fast_forward
                x = x.tanh_()
            elif kind == "relu":
                x = x.relu_()
            else:
                w, b, ws, bs, w_grad, b_grad = params
                if grad:
                    x = torch.bmm(x, w_grad.transpose(1, 2)) + b_grad.unsqueeze(1)
                elif self._batches_exactly(x.shape[1], w.shape[2], w.shape[1]):
                    x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
                else:
                    x = torch.stack([F.linear(*t) for t in zip(x.unbind(0), ws, bs)])
        return x

    def _batchable(self, name: str) -> bool:
        """Whether template.<name> runs batched on the stacked parameters: the actor's and
        ValueNet's calls on MLPs of Linear and Tanh or ReLU (bpo.py's MedianCritic and any other
        network: vmap over functional_call)."""
        if name not in ("sample_inputs", "mode", "dist_params", "log_prob_entropy", "critic"):
            return False
        if name == "critic" and not isinstance(self.template.critic, ValueNet):
            return False
        if name not in self._batchable_names:  # checked once per call name
            actor = "logits" if isinstance(self.template, CategoricalPolicy) else "mean"
            try:
                self._layers(self.HEADS["critic" if name == "critic" else actor])
                self._batchable_names[name] = True
            except (TypeError, AttributeError):
                self._batchable_names[name] = False
        return self._batchable_names[name]

    def per_seed(self, name: str, *args, **constants):
        if self.num_seeds == 1 or self._plain or not self._batchable(name):
            return super().per_seed(name, *args, **constants)
        if self._bound is not None:  # inside the vmapped loss: the networks run batched
            return self._in_loss(name, args, constants)
        if torch.is_grad_enabled() or name == "log_prob_entropy":
            return super().per_seed(name, *args, **constants)
        return self._batched(name, args[0])

    def _batched(self, name: str, obs: torch.Tensor):
        """template.<name> of every seed on obs [S, B, d], on the stacked parameters."""
        if name == "critic":
            return self._mlp(self.HEADS["critic"], obs).squeeze(-1)
        if isinstance(self.template, CategoricalPolicy):
            logits = self._mlp(self.HEADS["logits"], obs)
            if name == "sample_inputs":
                return logits
            return logits.argmax(-1) if name == "mode" else torch.log_softmax(logits, -1)
        mean = self._mlp(self.HEADS["mean"], obs)
        log_std = self._stacked["log_std"]  # [S, a]
        if name == "mode":
            return mean
        if name == "sample_inputs":
            return mean, log_std
        return mean, log_std.unsqueeze(1).expand_as(mean)

    def _in_loss(self, name: str, args: tuple, constants: dict):
        """A call of the vmapped loss (its arguments one seed's slices of [S, ...] tensors) run
        on the whole [S, ...] tensors with the stacked parameters, its outputs handed back to
        the loss as that seed's slices: the networks' forward and backward as a few batched
        matmuls instead of vmap over functional_call; the loss's own arithmetic stays
        vmapped, so it is the algorithm's loss, each seed's alone."""
        level = functorch.maybe_get_level(args[0])
        if level is None or level < 0 or functorch.maybe_current_level() != level:
            return super().per_seed(name, *args, **constants)  # not the loss's own vmap

        def unwrap(t):
            if not (isinstance(t, torch.Tensor) and functorch.is_batchedtensor(t)):
                return t
            value, dim = functorch._unwrap_batched(t, level)
            return value.movedim(dim, 0)

        xs = [unwrap(a) for a in args]
        if name != "log_prob_entropy":
            out = self._batched(name, xs[0])
        else:  # the template's own log_prob_entropy, its dist_params every seed's at once
            template = self.template
            template.dist_params = lambda obs: self._batched("dist_params", obs)
            try:
                out = type(template).log_prob_entropy(template, *xs, *constants.values())
            finally:
                del template.dist_params
        return _tree(out, lambda t: functorch._add_batch_dim(t, 0, level))


class ControlPopulationRun(PopulationActorCriticRun):
    """PopulationActorCriticRun on a Gymnasium or envpool: id (see the module docstring)."""

    def make_envs(self):
        """One vector env of S * N envs (a Gymnasium id: --vectorization's; envpool: its pool)."""
        args = self.args
        return envs.make(
            args.env_id, args.num_seeds * args.num_envs, args.seed, args.vectorization, copy=False
        )

    def population_policy(self, models, constant: bool = True) -> PopulationPolicy:
        """The seeds' actors and critics as a ControlPopulationPolicy (its batched rollout
        forward; one seed: the plain PopulationPolicy, the single run's ops)."""
        if len(models) == 1:
            policy = PopulationPolicy.build(models)
        else:
            policy = ControlPopulationPolicy.build(models)
        policy.generators = self.generators
        return policy

    def collect(self, policy: PopulationPolicy, critic):
        """PopulationActorCriticRun.collect, the rollout's action noise drawn up front where
        that gives the same numbers (ControlPopulationPolicy.draw_rollout_noise)."""
        if not isinstance(policy, ControlPopulationPolicy):
            return super().collect(policy, critic)
        policy.draw_rollout_noise(self.buffer.num_steps, self.args.num_envs)
        try:
            out = super().collect(policy, critic)
        except BaseException:
            policy._rollout_noise = None
            raise
        policy.end_rollout_noise()
        return out

    def make_collector(self) -> Collector:
        args = self.args
        return ControlCollector(
            self.envs,
            self.obs_normalizer,
            self.reward_scaler,
            args.truncation_as_terminal,
            args.num_seeds,
        )

    def start(self, **stateful):
        """Session.start with the envs mid-episode in the checkpoint (training.Run.start's
        rule), then every seed's envs reset as its run resets them, unless restored."""
        if self.resume_state is None or "collector" in self.resume_state:
            stateful["collector"] = self.collector
        iterations = super(PopulationActorCriticRun, self).start(**stateful)
        self.stateful["collector"] = self.collector
        if not self.collector.restored:
            seeds = population_env_seeds(self.seeds, self.args.num_envs, self.start_iteration)
            self.collector.reset(seed=seeds)
        self.collector.global_step = self.step * len(self.seeds)
        return iterations

    def _episode_stats(self, episodes: list[SeedEpisode]) -> dict[str, np.ndarray]:
        """training.episode_metrics of each seed's episodes (in the order its run lists them)."""
        S = len(self.seeds)
        ret, length = np.full(S, np.nan), np.full(S, np.nan)
        count = np.zeros(S, np.int64)
        for k in range(S):
            mine = [e for e in episodes if e.seed == k]
            if mine:
                ret[k] = float(np.mean([e.ret for e in mine]))
                length[k] = float(np.mean([e.length for e in mine]))
                count[k] = len(mine)
        return {
            "train/episode_return": ret,
            "train/episode_length": length,
            "train/episodes": count,
        }

    def evaluate(self, policy: PopulationPolicy) -> np.ndarray:
        """controlrl.evaluate.evaluate of every seed at once (population.evaluate_seeds), one
        env per seed."""
        eval_envs = envs.make(self.args.env_id, len(self.seeds), self.seeds[0])
        return evaluate_seeds(
            eval_envs, self.seeds, policy, self.obs_normalizer, self.args.eval_episodes
        )
