"""JAX policies of algos/ppo_brax.py (controlrl/nets.py's counterparts for the JAX path): MLPs
as lists of (W, b), and the policy distributions --policy selects: "gaussian" (CleanRL's: the
actor's mean and a state-independent log-std, actions clipped to [-1, 1]) and "tanh_normal"
(Brax's make_ppo_networks default, google/brax brax/training/distribution.py
NormalTanhDistribution: the actor outputs (loc, scale), std = softplus(scale) + 0.001, actions
tanh-squashed, entropy estimated from one sample).

Every function takes the actor's output `head`: the Gaussian's mean, or tanh_normal's (loc, scale)
concatenated. Actions are stored raw (tanh_normal: before the tanh, as Brax's rollout stores
raw_action) and log-probs are of the raw action; the env gets env_action(raw). JAX is imported
lazily, through envs.brax's configured JAX (its compilation cache).
"""

from __future__ import annotations

import math

ACTIVATIONS = ("tanh", "swish")  # swish = x * sigmoid(x), flax.linen.swish as Brax uses it
POLICIES = ("gaussian", "tanh_normal")
MIN_STD = 1e-3  # NormalTanhDistribution's min_std, google/brax brax/training/distribution.py


def _jax():
    from envs.brax import configured_jax

    return configured_jax()


def _jnp():
    return _jax().numpy


def init_mlp(key, sizes, out_gain):
    """[(W, b)] with orthogonal W (gain sqrt 2 for hidden layers, out_gain for the last)."""
    jax = _jax()
    init = jax.nn.initializers.orthogonal
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, sub = jax.random.split(key)
        gain = out_gain if i == len(sizes) - 2 else math.sqrt(2.0)
        layers.append((init(gain)(sub, (n_in, n_out)), _jnp().zeros(n_out)))
    return layers


def mlp(layers, x, activation: str = "tanh"):
    act = _jax().nn.swish if activation == "swish" else _jnp().tanh
    for w, b in layers[:-1]:
        x = act(x @ w + b)
    w, b = layers[-1]
    return x @ w + b


def log_prob(mean, log_std, action):
    jnp = _jnp()
    z = (action - mean) / jnp.exp(log_std)
    return (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def tanh_normal_loc_std(head):
    """(loc, std) of the pre-tanh Normal: std = softplus(scale) + MIN_STD (Brax's create_dist)."""
    jax, jnp = _jax(), _jnp()
    loc, scale = jnp.split(head, 2, axis=-1)
    return loc, jax.nn.softplus(scale) + MIN_STD


def tanh_log_det(raw):
    """log(1 - tanh(raw)^2) per dimension, in TanhBijector.forward_log_det_jacobian's stable form
    2 (log 2 - x - softplus(-2x)) (finite where tanh saturates to 1 in float32)."""
    return 2.0 * (math.log(2.0) - raw - _jax().nn.softplus(-2.0 * raw))


def sample_action(policy, params, head, key):
    """A raw action per state."""
    jax, jnp = _jax(), _jnp()
    if policy == "gaussian":
        return head + jnp.exp(params["log_std"]) * jax.random.normal(key, head.shape)
    loc, std = tanh_normal_loc_std(head)
    return loc + std * jax.random.normal(key, loc.shape)


def env_action(policy, raw):
    """What the env steps with: the Gaussian's clipped to [-1, 1], tanh_normal's squashed."""
    jnp = _jnp()
    return jnp.clip(raw, -1.0, 1.0) if policy == "gaussian" else jnp.tanh(raw)


def deterministic_action(policy, head):
    """The evaluation's action: the Gaussian's mean clipped, tanh(loc) (Brax's mode)."""
    if policy == "gaussian":
        return env_action(policy, head)
    return env_action(policy, tanh_normal_loc_std(head)[0])


def policy_log_prob(policy, params, head, raw):
    """log pi(a | s) of the raw action; for tanh_normal the density of the squashed action
    tanh(raw): the Normal's minus sum log(1 - tanh(raw)^2) (Brax's log_prob)."""
    if policy == "gaussian":
        return log_prob(head, params["log_std"], raw)
    loc, std = tanh_normal_loc_std(head)
    jnp = _jnp()
    z = (raw - loc) / std
    normal = -0.5 * z**2 - jnp.log(std) - 0.5 * math.log(2 * math.pi)
    return (normal - tanh_log_det(raw)).sum(-1)


def policy_entropy(policy, params, head, key):
    """The entropy bonus: the Gaussian's analytic entropy; for tanh_normal Brax's estimate, the
    Normal's entropy plus log(1 - tanh(x)^2) at one reparameterised sample x per state (drawn
    with `key`, one per minibatch as Brax's sgd_step), averaged over the states."""
    if policy == "gaussian":
        return (params["log_std"] + 0.5 * math.log(2 * math.pi * math.e)).sum()
    jax, jnp = _jax(), _jnp()
    loc, std = tanh_normal_loc_std(head)
    raw = loc + std * jax.random.normal(key, loc.shape)
    return (jnp.log(std) + 0.5 * math.log(2 * math.pi * math.e) + tanh_log_det(raw)).sum(-1).mean()


def policy_kl(policy, old_params, old_head, new_params, new_head):
    """Per-state KL(old || new). For tanh_normal the KL of the pre-tanh Normals, which equals the
    KL of the squashed distributions (tanh is a bijection); Brax's kl_mean adds 1e-5 inside its
    log, this one is exact."""
    jnp = _jnp()
    if policy == "gaussian":
        old_mean, old_log_std = old_head, old_params["log_std"]
        new_mean, new_log_std = new_head, new_params["log_std"]
    else:
        (old_mean, old_std), (new_mean, new_std) = map(tanh_normal_loc_std, (old_head, new_head))
        old_log_std, new_log_std = jnp.log(old_std), jnp.log(new_std)
    var_old, var_new = jnp.exp(2 * old_log_std), jnp.exp(2 * new_log_std)
    return (
        new_log_std - old_log_std + (var_old + (old_mean - new_mean) ** 2) / (2 * var_new) - 0.5
    ).sum(-1)
