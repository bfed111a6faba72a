"""JAX pytrees (parameters, optimiser state, normaliser statistics, PRNG keys, the envs' state)
as one object a Session checkpoints: algos/ppo_brax.py's single run and its population."""

from __future__ import annotations

import numpy as np
import torch


def _jax():
    from envs.brax import configured_jax  # JAX with our persistent compilation cache

    return configured_jax()


def _widen(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64) if x.dtype == np.uint32 else x


class JaxState:
    """Named JAX pytrees (parameters, optimiser state, normaliser statistics, PRNG key) as one
    object the Session checkpoints: leaves become torch tensors (weights-only loading). `flags`
    ({flag: value}) are saved beside them and must match on load."""

    def __init__(self, flags: dict[str, str] | None = None, optional=(), **trees) -> None:
        self.flags = dict(flags or {})
        self.trees = trees
        self.optional = tuple(optional)  # trees a checkpoint may lack (kept as they are)
        self.restored: set[str] = set()  # the trees the last load_state_dict put back

    def state_dict(self) -> dict:
        leaves = _jax().tree_util.tree_leaves
        # torch has no uint32 (PRNG keys): widen to int64, narrowed back on load
        state = {
            k: [torch.from_numpy(_widen(np.array(x))) for x in leaves(tree)]
            for k, tree in self.trees.items()
        }
        return {**state, "flags": dict(self.flags)}

    def load_state_dict(self, state: dict) -> None:
        jax = _jax()
        saved = state.get("flags", {})  # none in checkpoints written before flags were saved
        for flag, value in self.flags.items():
            if flag in saved and saved[flag] != value:
                name = "--" + flag.replace("_", "-")
                raise ValueError(
                    f"the checkpoint was written with {name} {saved[flag]}, this run has {value}"
                )
        for name, like in self.trees.items():
            if name not in state and name in self.optional:
                continue  # a checkpoint written before it was saved
            leaves, treedef = jax.tree_util.tree_flatten(like)
            tensors = state[name]
            if len(leaves) != len(tensors) or any(
                tuple(a.shape) != tuple(t.shape) for a, t in zip(leaves, tensors)
            ):
                raise ValueError(f"checkpoint '{name}' does not match this configuration")
            values = [jax.numpy.asarray(t.numpy().astype(a.dtype)) for a, t in zip(leaves, tensors)]
            self.trees[name] = jax.tree_util.tree_unflatten(treedef, values)
            self.restored.add(name)
