"""PPO (Schulman et al. 2017, "Proximal Policy Optimization Algorithms") on Brax with the policy,
the rollout and the update in JAX (two jitted calls per iteration), for when the torch path of
algos/ppo.py is too slow: on Brax the torch path crosses to the host on every env step, while here a
whole rollout is one lax.scan over the vmapped brax step (paper_figures/brax_ppo_race.py measures
both against Brax's own trainer).

    python algos/ppo_brax.py --env-id brax:ant --total-timesteps 5000000 --seed 1
    python algos/ppo_brax.py --env-id brax:ant --num-seeds 8   # seeds 1-8 vmapped (PureJaxRL)

Same flags, losses and run directory as algos/ppo.py (config.json, metrics.csv, timing.csv,
tb/, checkpoints/latest.pt, final_eval.json; --resume): the clipped surrogate, clipped value
loss, per-minibatch advantage normalisation, global grad-norm clip, Adam (eps 1e-5) with linear
LR annealing, running observation normalisation and return-based reward scaling (clip 10),
64-64 tanh actor and critic with orthogonal init and a state-independent log-std, timeouts
bootstrapped from V(true final observation). Differences: brax: ids only; defaults of 64 envs x
32 steps (the same 2048-sample batch and 64-sample minibatches as ppo.py's 1 x 2048); --target-kl,
--capture-video, --ratio and the torch flags do not apply; random streams are JAX's, so a seed gives
other numbers than ppo.py (but the same numbers every time). The checkpoint holds the envs'
state (every env mid-episode), so a killed and resumed run is the uninterrupted one bit for bit.

Brax's own PPO settings (google/brax brax/training/agents/ppo/train.py and networks.py) are
stated with --activation swish, --reward-scale (its reward_scaling), --no-clip-grad (its
max_grad_norm=None), --adam-eps 1e-8 (optax's default), the layer sizes and --policy tanh_normal
(its make_ppo_networks distribution: a tanh-squashed Normal whose loc and std the policy network
outputs; raw pre-tanh actions are stored and the log-probs carry the tanh Jacobian).

Speed (paper_figures/README.md, the Brax PPO race): on XLA:CPU a minibatch step of these small
networks costs per kernel, not per FLOP, so the update steps Adam on one flat parameter vector
(one set of Adam kernels instead of one per parameter leaf), and the batch never leaves the
device: the iteration fetches its logged scalars in one transfer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from algos import ppo
from controlrl.cli import parse, require, require_positive
from controlrl.diagnostics import NonFiniteError
from controlrl.jax_policy import (
    ACTIVATIONS,
    POLICIES,
    deterministic_action,
    env_action,
    init_mlp,
    mlp,
    policy_entropy,
    policy_kl,
    policy_log_prob,
    sample_action,
)
from controlrl.jax_state import JaxState
from controlrl.session import Session, Timer
from controlrl.update import linear_lr

OBS_CLIP, REW_CLIP, NORM_EPS, COUNT_PRIOR = 10.0, 10.0, 1e-8, 1e-4  # as controlrl.normalize


@dataclass
class Args(ppo.Args):
    population_backends: ClassVar[tuple[str, ...]] = ("brax",)

    env_id: str = "brax:ant"
    """a brax: id (brax:ant, brax:halfcheetah, brax:inverted_pendulum, ...)"""
    num_envs: int = 64
    """parallel brax environments (one vmapped batch)"""
    num_steps: int = 32
    """steps per env per rollout (64 x 32 = ppo.py's 2048-sample batch)"""
    episode_length: int = 1000
    """time limit of an episode (truncation, bootstrapped)"""
    activation: str = "tanh"
    """hidden-layer activation of actor and critic: tanh (CleanRL) or swish (Brax's
    make_ppo_networks default, brax/training/agents/ppo/networks.py, with policy 32x4 and value
    256x5: --hidden-sizes 32 32 32 32 --critic-hidden-sizes 256 256 256 256 256)"""
    reward_scale: float = 1.0
    """constant multiplier on the reward before --norm-reward's scaling (Brax's reward_scaling,
    default 1; with --no-norm-reward it is the only scaling); logged returns stay unscaled"""
    clip_grad: bool = True
    """clip the global gradient norm at --max-grad-norm (CleanRL); --no-clip-grad as Brax's
    default max_grad_norm=None (brax/training/agents/ppo/train.py)"""
    adam_eps: float = 1e-5
    """Adam epsilon (CleanRL 1e-5; Brax's optax.adam default 1e-8)"""
    policy: str = "gaussian"
    """the policy's distribution: gaussian (CleanRL: the actor's mean and a state-independent
    log-std, actions clipped to [-1, 1]) or tanh_normal (Brax's make_ppo_networks default,
    brax/training/distribution.py NormalTanhDistribution: the actor outputs loc and scale, std =
    softplus(scale) + 0.001, actions tanh-squashed, entropy estimated from one sample)"""

    def validate(self) -> None:
        super().validate()
        from envs import split_id

        require(
            split_id(self.env_id)[0] == "brax",
            "env_id",
            f"must be a brax: id for ppo_brax.py, got {self.env_id} (algos/ppo.py runs them all)",
        )
        require(self.target_kl is None, "target_kl", "is not supported by ppo_brax.py")
        require(self.ratio == "step", "ratio", "is not supported by ppo_brax.py (ppo.py has it)")
        require(self.episode_length > 0, "episode_length", "must be > 0")
        require(
            self.activation in ACTIVATIONS,
            "activation",
            f"must be one of {', '.join(ACTIVATIONS)}, got {self.activation}",
        )
        require(
            self.policy in POLICIES,
            "policy",
            f"must be one of {', '.join(POLICIES)}, got {self.policy}",
        )
        require_positive(self, "reward_scale", "adam_eps")


# ---- the PPO loss (ppo.py's terms, in JAX) ----------------------------------------------------


def loss_fn(params, mb, args: Args):
    """PPO loss on a minibatch (minimised) and its statistics: the same terms as ppo.py."""
    jnp = _jnp()
    head = mlp(params["actor"], mb["obs"], args.activation)
    logp = policy_log_prob(args.policy, params, head, mb["action"])
    log_ratio = logp - mb["logp"]
    ratio = jnp.exp(log_ratio)
    adv = mb["advantages"]
    if args.norm_adv:
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)  # torch's std is unbiased
    eps = args.clip_coef
    pg_loss = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1 - eps, 1 + eps)).mean()
    v_new = value(params, mb["obs"], args.activation)
    err = (v_new - mb["returns"]) ** 2
    if args.clip_vloss:
        v_clip = mb["values"] + jnp.clip(v_new - mb["values"], -eps, eps)
        err = jnp.maximum(err, (v_clip - mb["returns"]) ** 2)
    v_loss = 0.5 * err.mean()
    entropy = policy_entropy(args.policy, params, head, mb.get("entropy_key"))
    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
    stats = {
        "approx_kl": ((ratio - 1) - log_ratio).mean(),  # k3, as controlrl.losses.approx_kl
        "clip_frac": (jnp.abs(ratio - 1) > eps).mean(),
        "loss": loss,
        "policy_loss": pg_loss,
        "value_loss": v_loss,
        "entropy": entropy,
    }
    return loss, stats


# ---- running statistics (float32 in-graph versions of controlrl.normalize) ----------------------


def rms_init(shape):
    jnp = _jnp()
    return {"mean": jnp.zeros(shape), "var": jnp.ones(shape), "count": jnp.float32(COUNT_PRIOR)}


def rms_update(rms, x):
    """Chan et al. parallel update with a batch x [B, *shape]."""
    n = x.shape[0]
    mean, var = x.mean(0), x.var(0)
    delta = mean - rms["mean"]
    total = rms["count"] + n
    m2 = rms["var"] * rms["count"] + var * n + delta**2 * rms["count"] * n / total
    return {"mean": rms["mean"] + delta * n / total, "var": m2 / total, "count": total}


def normalize(rms, x):
    jnp = _jnp()
    return jnp.clip((x - rms["mean"]) / jnp.sqrt(rms["var"] + NORM_EPS), -OBS_CLIP, OBS_CLIP)


def explained_variance(values, returns):
    """1 - Var(R - V) / Var(R), nan when the returns are constant (controlrl.diagnostics'
    explained_variance, in-graph)."""
    jnp = _jnp()
    var = returns.var()
    return jnp.where(var == 0, jnp.nan, 1 - (returns - values).var() / var)


# ---- networks -----------------------------------------------------------------------------------


def init_params(key, obs_dim, act_dim, args: Args):
    jax = _jax()
    k_actor, k_critic = jax.random.split(key)
    critic = args.critic_hidden_sizes or args.hidden_sizes
    head = 2 * act_dim if args.policy == "tanh_normal" else act_dim  # (loc, scale) or the mean
    params = {
        "actor": init_mlp(k_actor, [obs_dim, *args.hidden_sizes, head], 0.01),
        "critic": init_mlp(k_critic, [obs_dim, *critic, 1], 1.0),
    }
    if args.policy == "gaussian":
        params["log_std"] = _jnp().zeros(act_dim)
    return params


def value(params, obs, activation: str = "tanh"):
    return mlp(params["critic"], obs, activation)[..., 0]


# ---- the update's entropy keys (tanh_normal) --------------------------------------------------


def entropy_keys(policy, key, num_minibatches):
    """{"entropy_key": one key per minibatch} for tanh_normal's sampled entropy, {} otherwise."""
    jax = _jax()
    if policy == "gaussian":
        return {}
    return {"entropy_key": jax.random.split(jax.random.fold_in(key, 1), num_minibatches)}


# ---- rollout, GAE, update -----------------------------------------------------------------------


def make_optimizer(args: Args):
    """Adam's scaling (the learning rate is applied by the update), after the global grad-norm
    clip unless --no-clip-grad."""
    import optax

    clip = [optax.clip_by_global_norm(args.max_grad_norm)] if args.clip_grad else []
    return optax.chain(*clip, optax.scale_by_adam(eps=args.adam_eps))


def init_optimizer(tx, params):
    """The optimiser's state for the flat parameter vector the update steps."""
    from jax.flatten_util import ravel_pytree

    return tx.init(ravel_pytree(params)[0])


def make_functions(env, args: Args):
    """(reset, rollout, update, evaluate), pure and jitted."""
    jax, jnp = _jax(), _jnp()
    from jax.flatten_util import ravel_pytree

    from envs.brax import batched_functions

    n, T = args.num_envs, args.num_steps
    env_reset, env_step, env_autoreset = batched_functions(env, n)
    tx = make_optimizer(args)
    act = args.activation

    def reset(key, obs_rms):
        state = env_reset(key)
        obs_rms = rms_update(obs_rms, state.obs) if args.norm_obs else obs_rms
        return state, jnp.zeros(n, jnp.int32), obs_rms

    def rollout(params, carry, key):
        def step(c, key_t):
            state, steps, obs_rms, rew_rms, ret, ep_ret, ep_len = c
            k_act, k_reset = jax.random.split(key_t)
            obs = normalize(obs_rms, state.obs) if args.norm_obs else state.obs
            mean = mlp(params["actor"], obs, act)  # the head: the mean, or (loc, scale)
            action = sample_action(args.policy, params, mean, k_act)
            nxt = env_step(state, env_action(args.policy, action))
            steps = steps + 1
            term = nxt.done > 0
            trunc = (steps >= args.episode_length) & ~term
            ended = term | trunc
            if args.truncation_as_terminal:  # CleanRL's convention: no bootstrap at time limits
                term, trunc = ended, jnp.zeros_like(trunc)
            ep_ret, ep_len = ep_ret + nxt.reward, ep_len + 1
            reward = nxt.reward * args.reward_scale
            if args.norm_reward:
                ret = ret * args.gamma + reward
                rew_rms = rms_update(rew_rms, ret[:, None])
                ret = jnp.where(ended, 0.0, ret)
                scaled = jnp.clip(reward / jnp.sqrt(rew_rms["var"][0] + NORM_EPS), -10, 10)
            else:
                scaled = reward
            final = normalize(obs_rms, nxt.obs) if args.norm_obs else nxt.obs
            state = jax.lax.cond(
                ended.any(), lambda: env_autoreset(nxt, ended, k_reset), lambda: nxt
            )
            if args.norm_obs:
                obs_rms = rms_update(obs_rms, state.obs)
            out = {
                "obs": obs,
                "mean": mean,
                "action": action,
                "logp": policy_log_prob(args.policy, params, mean, action),
                "reward": scaled,
                "term": term,
                "trunc": trunc,
                "ended": ended,
                "final_obs": final,
                "done_return": jnp.where(ended, ep_ret, 0.0),
                "done_length": jnp.where(ended, ep_len, 0),
            }
            ep_ret, ep_len = jnp.where(ended, 0.0, ep_ret), jnp.where(ended, 0, ep_len)
            steps = jnp.where(ended, 0, steps)
            return (state, steps, obs_rms, rew_rms, ret, ep_ret, ep_len), out

        carry, batch = jax.lax.scan(step, carry, jax.random.split(key, T))
        state, obs_rms = carry[0], carry[2]
        last_obs = normalize(obs_rms, state.obs) if args.norm_obs else state.obs
        values = value(params, batch["obs"], act)
        next_obs_values = jnp.concatenate([values[1:], value(params, last_obs, act)[None]])
        next_values = jnp.where(
            batch["trunc"], value(params, batch["final_obs"], act), next_obs_values
        )
        not_term = 1.0 - batch["term"]
        deltas = batch["reward"] + args.gamma * next_values * not_term - values
        discounts = args.gamma * args.gae_lambda * (1.0 - batch["ended"])

        def backward(acc, x):
            acc = x[0] + x[1] * acc
            return acc, acc

        _, adv = jax.lax.scan(backward, jnp.zeros(n), (deltas, discounts), reverse=True)
        batch.update(values=values, advantages=adv, returns=adv + values)
        # the episodes that ended in this rollout, summed here so that no [T, N] array has to
        # go to the host
        batch.update(
            episodes=batch["ended"].sum(),
            episode_return_sum=batch.pop("done_return").sum(),
            episode_length_sum=batch.pop("done_length").sum(),
        )
        return carry, batch

    def update(params, opt_state, batch, key, lr):
        size = n * T
        mb_size = size // args.num_minibatches
        used = mb_size * args.num_minibatches
        data = {
            k: batch[k].reshape(size, *batch[k].shape[2:])
            for k in ("obs", "action", "logp", "values", "advantages", "returns")
        }
        # Adam on one flat parameter vector (as controlrl.update's fused Adam): on XLA:CPU each
        # parameter leaf costs its own kernels per step, and the minibatch steps are that small
        flat, unravel = ravel_pytree(params)

        def minibatch(carry, mb):
            flat, opt_state = carry
            grads, stats = jax.grad(lambda f: loss_fn(unravel(f), mb, args), has_aux=True)(flat)
            updates, opt_state = tx.update(grads, opt_state)
            return (flat - lr * updates, opt_state), stats

        def epoch(carry, key_e):
            # one gather per epoch, then contiguous minibatches (as brax's sgd_step)
            idx = jax.random.permutation(key_e, size)[:used]
            mbs = {
                k: v[idx].reshape(args.num_minibatches, mb_size, *v.shape[1:])
                for k, v in data.items()
            }
            mbs.update(entropy_keys(args.policy, key_e, args.num_minibatches))
            return jax.lax.scan(minibatch, carry, mbs)

        keys = jax.random.split(key, args.update_epochs)
        (flat, opt_state), stats = jax.lax.scan(epoch, (flat, opt_state), keys)
        new_params = unravel(flat)
        # statistics reduced as controlrl.update.reduce_stats: max for "_max" names, else mean
        out = {k: v.max() if k.endswith("_max") else v.mean() for k, v in stats.items()}
        # over the whole batch after the update, as controlrl.diagnostics.policy_shift: per-state
        # KL(old || new) and the deviation |r - 1| of the ratios; the old heads are the rollout's
        # (same parameters, same observations)
        old_head = batch["mean"].reshape(size, -1)
        new_head = mlp(new_params["actor"], data["obs"], act)
        kl = policy_kl(args.policy, params, old_head, new_params, new_head)
        logp = policy_log_prob(args.policy, new_params, new_head, data["action"])
        deviation = jnp.abs(jnp.exp(logp - data["logp"]) - 1)
        out.update(
            kl_mean=kl.mean(),
            kl_max=kl.max(),
            ratio_dev_frac=(deviation > args.clip_coef).mean(),
            ratio_dev_max=deviation.max(),
            ratio_dev_mean=deviation.mean(),
            explained_variance=explained_variance(data["values"], data["returns"]),
            finite=jnp.isfinite(flat).all(),
            **{k: batch[k] for k in ("episodes", "episode_return_sum", "episode_length_sum")},
        )
        return new_params, opt_state, out

    def evaluate(params, obs_rms, key):
        """Deterministic (mean) actions, one episode per env, normaliser frozen."""
        eval_n = args.eval_episodes
        e_reset, e_step, _ = batched_functions(env, eval_n)

        def step(c, _):
            state, total, alive, t = c
            obs = normalize(obs_rms, state.obs) if args.norm_obs else state.obs
            action = deterministic_action(args.policy, mlp(params["actor"], obs, act))
            state = e_step(state, action)
            total = total + jnp.where(alive, state.reward, 0.0)
            alive = alive & (state.done == 0) & (t + 1 < args.episode_length)
            return (state, total, alive, t + 1), None

        init = (e_reset(key), jnp.zeros(eval_n), jnp.ones(eval_n, bool), 0)
        (_, total, _, _), _ = jax.lax.scan(step, init, None, length=args.episode_length)
        return total

    return (
        jax.jit(reset),
        jax.jit(rollout),
        jax.jit(update),
        jax.jit(evaluate),
        tx,
    )


# ---- the run ------------------------------------------------------------------------------------


def _jax():
    from envs.brax import configured_jax  # JAX with our persistent compilation cache

    return configured_jax()


def _jnp():
    return _jax().numpy


def fresh_carry(reset, args: Args, key, obs_rms, rew_rms):
    """(key, carry): a fresh episode in every env, its reset observation folded into obs_rms
    once; the reward scaler's per-env discounted returns and the episode sums start at zero (as
    in controlrl.rollout.Collector.reset)."""
    jax, jnp = _jax(), _jnp()
    key, k_reset = jax.random.split(key)
    env_state, steps, obs_rms = reset(k_reset, obs_rms)
    zeros, counts = jnp.zeros(args.num_envs), jnp.zeros(args.num_envs, jnp.int32)
    return key, (env_state, steps, obs_rms, rew_rms, zeros, zeros, counts)


def make_env(args: Args):
    from brax import envs as brax_envs

    from envs import split_id
    from envs.brax import DEFAULT_PIPELINE

    name, pipeline = split_id(args.env_id)[1], args.brax_pipeline or DEFAULT_PIPELINE
    return brax_envs.get_environment(name, backend=pipeline)


def iteration_metrics(out: dict, args: Args, lr: float) -> tuple[dict, np.ndarray]:
    """The logged metrics of an update's fetched statistics (each a scalar, or [S] for a
    population), and whether each run's parameters and statistics are finite."""
    finite = np.asarray(out.pop("finite"))
    n_done = np.asarray(out.pop("episodes"))
    ret_sum, len_sum = np.asarray(out.pop("episode_return_sum")), out.pop("episode_length_sum")
    explained = np.asarray(out.pop("explained_variance"), np.float64)
    stats = {k: np.asarray(v, np.float64) for k, v in out.items()}
    for v in stats.values():
        finite = finite & np.isfinite(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_episode = {"return": ret_sum / n_done, "length": np.asarray(len_sum) / n_done}
    metrics = {
        **{f"train/episode_{k}": np.where(n_done > 0, v, np.nan) for k, v in per_episode.items()},
        "train/episodes": n_done,
        "train/explained_variance": explained,
        **{f"train/{k}": v for k, v in stats.items()},
        "train/grad_steps": args.update_epochs * args.num_minibatches,
        "train/learning_rate": lr,
    }
    if finite.ndim == 0:  # one run: Python numbers, as the logger writes them
        metrics = {k: np.asarray(v).item() for k, v in metrics.items()}
    return metrics, finite


def main(args: Args) -> None:
    if args.num_seeds is not None:  # every seed at once: vmap over the seed axis
        return main_population(args)
    jax = _jax()
    session = Session(args, steps_per_iteration=args.num_envs * args.num_steps)
    env = make_env(args)
    reset, rollout, update, evaluate, tx = make_functions(env, args)
    key, k_init = jax.random.split(jax.random.PRNGKey(args.seed))
    params = init_params(k_init, env.observation_size, env.action_size, args)
    obs_rms, rew_rms = rms_init((env.observation_size,)), rms_init((1,))
    # a run starts here; the checkpoint holds the carry (every env mid-episode, the normalisers,
    # the episode sums), so a resumed run continues the uninterrupted one bit for bit
    start_key, carry = fresh_carry(reset, args, key, obs_rms, rew_rms)
    state = JaxState(
        {"policy": args.policy},
        optional=("carry",),
        params=params,
        opt_state=init_optimizer(tx, params),
        obs_rms=obs_rms,
        rew_rms=rew_rms,
    )
    state.trees["key"] = key
    state.trees["carry"] = carry
    iterations = session.start(jax=state)
    params, opt_state, obs_rms, rew_rms, key, carry = state.trees.values()
    if session.resume_state is None:
        key = start_key
    elif "carry" not in state.restored:
        # a checkpoint written before the carry was saved: fresh episodes from its key, with
        # its statistics (rew_rms's are the checkpoint's)
        key, carry = fresh_carry(reset, args, key, obs_rms, rew_rms)
    with session.status("compiling..."):  # on throwaway keys, so the run's numbers are unchanged
        t0 = time.perf_counter()
        _, warm = rollout(params, carry, jax.random.PRNGKey(0))
        jax.block_until_ready(update(params, opt_state, warm, jax.random.PRNGKey(0), 0.0))
    session.write(f"{args.env_id}: compiled in {time.perf_counter() - t0:.1f} s")

    def run_eval() -> float:
        nonlocal key
        key, k_eval = jax.random.split(key)
        # the checkpoint written after this evaluation holds the key the run goes on with, so a
        # resumed run never draws k_eval again (its reset key would equal it)
        state.trees["key"] = key
        return float(np.mean(evaluate(params, carry[2], k_eval)))

    for iteration in iterations:
        lr = linear_lr(args.learning_rate, iteration, session.num_iterations, args.anneal_lr)
        timer = Timer()
        key, k_roll, k_upd = jax.random.split(key, 3)
        carry, batch = rollout(params, carry, k_roll)
        jax.block_until_ready(batch["returns"])
        timer.lap("rollout_s")
        params, opt_state, out = update(params, opt_state, batch, k_upd, lr)
        out = jax.device_get(out)  # one transfer of the scalars, the batch stays on the device
        timer.lap("update_s")
        metrics, finite = iteration_metrics(out, args, lr)
        with session.guard():
            if not finite:
                raise NonFiniteError(f"non-finite parameters or losses at iteration {iteration}")
        session.step += session.steps_per_iteration
        state.trees.update(params=params, opt_state=opt_state, obs_rms=carry[2])
        state.trees.update(rew_rms=carry[3], key=key, carry=carry)
        session.end_iteration(
            iteration, metrics, timer.timing(session.steps_per_iteration), run_eval
        )
    session.finish(run_eval)


def main_population(args: Args) -> None:
    """--num-seeds S: PureJaxRL's `jax.jit(jax.vmap(train))(rngs)` (ppo_continuous_action.py)
    of the jitted rollout, update and evaluation, every argument but the learning rate with a
    leading seed axis. Seed k starts as `--seed k` alone (that run's own unbatched calls,
    stacked) and draws its keys; XLA's batched kernels may round otherwise, so seed k follows
    `--seed k` within float rounding. One PopulationSession run directory (controlrl.population)."""
    from controlrl.population import PopulationSession

    jax, jnp = _jax(), _jnp()
    S, per_iteration = args.num_seeds, args.num_envs * args.num_steps
    session = PopulationSession(args, steps_per_iteration=per_iteration)
    env = make_env(args)
    reset, rollout, update, evaluate, tx = make_functions(env, args)
    seeds = []
    for seed in session.seeds:  # each seed's start, as its single run makes it
        key, k_init = jax.random.split(jax.random.PRNGKey(seed))
        params = init_params(k_init, env.observation_size, env.action_size, args)
        obs_rms, rew_rms = rms_init((env.observation_size,)), rms_init((1,))
        key, carry = fresh_carry(reset, args, key, obs_rms, rew_rms)
        seeds.append((params, init_optimizer(tx, params), obs_rms, rew_rms, key, carry))
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *seeds)
    names = ("params", "opt_state", "obs_rms", "rew_rms", "key", "carry")
    state = JaxState({"policy": args.policy}, **dict(zip(names, stacked)))
    iterations = session.start(jax=state)
    params, opt_state, _, _, key, carry = state.trees.values()
    v_rollout = jax.jit(jax.vmap(rollout))
    v_update = jax.jit(jax.vmap(update, in_axes=(0, 0, 0, 0, None)))
    v_evaluate = jax.jit(jax.vmap(evaluate))
    split = jax.jit(jax.vmap(lambda k: jax.random.split(k, 3)))  # each seed's split(key, 3)
    split2 = jax.jit(jax.vmap(jax.random.split))  # and its split(key): other keys than [:2]
    with session.status("compiling..."):  # on throwaway keys, so the run's numbers are unchanged
        t0 = time.perf_counter()
        _, warm = v_rollout(params, carry, split(key)[:, 0] + 1)
        jax.block_until_ready(v_update(params, opt_state, warm, split(key)[:, 0] + 1, 0.0))
    session.write(f"{args.env_id}: {S} seeds compiled in {time.perf_counter() - t0:.1f} s")

    def run_eval() -> np.ndarray:
        nonlocal key
        keys = split2(key)
        key, k_eval = keys[:, 0], keys[:, 1]
        state.trees["key"] = key
        return np.asarray(v_evaluate(params, carry[2], k_eval), np.float64).mean(1)

    for iteration in iterations:
        lr = linear_lr(args.learning_rate, iteration, session.num_iterations, args.anneal_lr)
        timer = Timer()
        keys = split(key)
        key, k_roll, k_upd = keys[:, 0], keys[:, 1], keys[:, 2]
        carry, batch = v_rollout(params, carry, k_roll)
        jax.block_until_ready(batch["returns"])
        timer.lap("rollout_s")
        params, opt_state, out = v_update(params, opt_state, batch, k_upd, lr)
        out = jax.device_get(out)
        timer.lap("update_s")
        metrics, finite = iteration_metrics(out, args, lr)
        with session.guard():
            if not finite.all():
                bad = f"iteration {iteration} in seeds (indices) {np.flatnonzero(~finite)[:10]}"
                raise NonFiniteError(f"non-finite parameters or losses at {bad}")
        session.step += per_iteration
        state.trees.update(params=params, opt_state=opt_state, obs_rms=carry[2])
        state.trees.update(rew_rms=carry[3], key=key, carry=carry)
        session.end_iteration(iteration, metrics, timer.timing(per_iteration * S), run_eval)
    session.finish(run_eval)


if __name__ == "__main__":
    main(parse(Args))
