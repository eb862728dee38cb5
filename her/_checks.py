"""Argument checks of the her package (its own, so that her imports nothing of goalenvs).

Every check raises a one-line ``TypeError`` or ``ValueError`` naming the argument, what is expected
and what was received. Nothing here is public API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["check_array", "check_bool", "check_int", "check_keys", "env_infos"]


def check_int(name: str, value: Any, low: int | None = None) -> int:
    """``value`` as an int ``>= low``; bools are refused (``True`` is never a count to a user)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")
    return bool(value)


def env_infos(infos: Any, n_envs: int) -> list[Any]:
    """The ``n_envs`` per-env info dicts of one vector step: from a list of dicts (stable-baselines3),
    gymnasium's dict of arrays (a key counts for env ``i`` where its ``"_" + key`` mask is True or
    absent), or None (Nones)."""
    if infos is None:
        return [None] * n_envs
    if isinstance(infos, Mapping):
        return [_env_info(infos, i, n_envs) for i in range(n_envs)]
    if not isinstance(infos, (Sequence, np.ndarray)):
        raise TypeError(
            f"infos must be None, a list of dicts or a dict of arrays, got {type(infos).__name__}"
        )
    if len(infos) != n_envs:
        raise ValueError(f"infos must have one entry per env ({n_envs}), got {len(infos)}")
    return list(infos)


def _env_info(infos: Mapping[str, Any], i: int, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in infos.items():
        mask = infos.get("_" + key)
        if key.startswith("_") or (mask is not None and not np.asarray(mask)[i]):
            continue
        if isinstance(value, Mapping):
            out[key] = _env_info(value, i, n)
        elif isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == n:
            out[key] = value[i]
        else:
            out[key] = value
    return out


def check_keys(value: Any, keys: frozenset[str], name: str) -> None:
    """``value`` must be a mapping with exactly ``keys``."""
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{name} must be a dict of arrays with the keys {sorted(keys)}, got {type(value).__name__}"
        )
    if value.keys() != keys:
        missing, unexpected = sorted(keys - value.keys()), sorted(map(str, value.keys() - keys))
        raise ValueError(
            f"{name} must have the keys {sorted(keys)} of the observation space: "
            f"missing {missing}, unexpected {unexpected}"
        )


#: Per stored dtype kind, the kinds of values accepted (cast on writing): the same kind, or bool and
#: integers into a wider kind. Floats into an integer field would be truncated and anything into a
#: bool field collapsed to True/False, silently: refused. Other kinds need the exact dtype.
_ACCEPTED_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}
_KIND_NAMES = {"b": "bool", "i": "integer", "u": "integer", "f": "float", "c": "complex"}


def check_array(
    value: Any,
    shape: tuple[int, ...],
    dtype: np.dtype,
    label: str,
    lead: str,
    finite: bool,
    env_axis: int = 0,
    kinds: str | None = None,
) -> np.ndarray:
    """``value`` as an array of exactly ``shape`` (axes of length 1 may be added or left out: they do
    not reorder the values), of a dtype that casts to ``dtype`` without changing what the values mean.

    ``lead`` explains the leading axes in the error (e.g. ``"n_envs=2"``). With ``finite``, float
    values must be finite (the error names the envs, axis ``env_axis``, that hold others). ``kinds``:
    the dtype kinds accepted, if not those of ``dtype``'s kind. Returned reshaped, not cast.
    """
    if type(value) is not np.ndarray:
        try:
            value = np.asarray(value)
        except (TypeError, ValueError):  # ragged nested lists and the like
            raise ValueError(
                f"{label} must be an array of shape {shape}, got a {type(value).__name__} numpy cannot read as one"
            ) from None
    if value.shape != shape:
        if tuple(d for d in value.shape if d != 1) != tuple(d for d in shape if d != 1):
            raise ValueError(f"{label} must have shape {shape} ({lead}), got {value.shape}")
        value = value.reshape(shape)
    kind, kinds = value.dtype.kind, kinds or _ACCEPTED_KINDS.get(dtype.kind, "")
    if kind not in kinds and value.dtype != dtype:
        accepted = ", ".join(dict.fromkeys(_KIND_NAMES[k] for k in kinds))
        expected = f"{dtype} ({accepted} values accepted)" if accepted else str(dtype)
        raise TypeError(f"{label} must be {expected}, got dtype {value.dtype}")
    if finite and kind in "fc" and value.size and not _sum_finite(value):
        bad = ~np.isfinite(value)
        if bad.any():
            other = tuple(i for i in range(bad.ndim) if i != env_axis)
            envs = np.flatnonzero(bad.any(axis=other) if other else bad).tolist()
            raise ValueError(
                f"{label} holds non-finite values (NaN or inf) for env(s) {envs}, which would poison "
                "training; nothing of this step was stored (HerStorage(check_finite=False) stores them)"
            )
    return value


def _sum_finite(value: np.ndarray) -> bool:
    """Whether a sum over ``value`` is finite: only if every value is (one C call; a false answer may
    also be an overflow of huge values, which the caller's exact test tells apart). ``np.vdot(v, v)``
    is the cheapest call on a step's few values; on a block's many, a plain sum (the dot products
    go to BLAS, whose threads spin on a loaded machine: up to 0.4 ms for 25,000 values)."""
    flat = value.reshape(-1)
    return math.isfinite(abs(np.vdot(flat, flat) if flat.size < 1024 else flat.sum()))
