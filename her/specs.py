"""What a HER storage stores (``(shape, dtype)`` specs from gymnasium spaces, the bounds of integer
actions), and :func:`checked`, which makes a value an array of a field's spec or raises one line naming it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

#: ``(shape, dtype)`` of one stored field (per env and step).
Spec = tuple[tuple[int, ...], np.dtype]
# Per stored dtype kind, the kinds of values accepted (then cast): the same kind, or bool and integers
# into a wider kind. Floats into an integer field would be truncated, and anything into a bool field
# collapsed to True/False: refused. Other kinds need the exact dtype.
ACCEPTED_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}
KIND_NAMES = {"b": "bool", "i": "integer", "u": "integer", "f": "float", "c": "complex"}


def checked(
    value: Any,
    shape: tuple[int, ...],
    dtype: np.dtype,
    label: str,
    lead: str,
    finite: bool,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
    kinds: str | None = None,
    env_axis: int = 0,
) -> np.ndarray:
    """``value`` as an array of exactly ``shape`` and ``dtype`` (axes of length 1 may be added or left
    out), or a one-line error naming ``label``. The dtype must cast without changing what the values mean
    (``kinds``: the kinds accepted, if not :data:`ACCEPTED_KINDS`'), and every value must survive the cast,
    lie within ``bounds`` and, with ``finite``, be finite as stored (the error names the envs, axis
    ``env_axis``). ``lead`` explains the leading axes (``"steps=5, n_envs={}"``: n_envs in the braces).
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
            lead = lead.format(shape[env_axis]) + f", then the space's {shape[env_axis + 1 :]}"
            raise ValueError(f"{label} must have shape {shape} ({lead}), got {value.shape}")
        value = value.reshape(shape)
    if value.dtype != dtype:
        kinds = kinds or ACCEPTED_KINDS.get(dtype.kind, "")
        if value.dtype.kind not in kinds:
            accepted = ", ".join(dict.fromkeys(KIND_NAMES[k] for k in kinds))
            expected = f"{dtype} ({accepted} values accepted)" if accepted else str(dtype)
            raise TypeError(f"{label} must be {expected}, got dtype {value.dtype}")
        with np.errstate(over="ignore", invalid="ignore"):  # what overflows is refused below
            cast = value.astype(dtype)
        if dtype.kind in "iu" and not np.can_cast(value.dtype, dtype) and (cast != value).any():
            wrong = value[cast != value].flat[0]
            info = np.iinfo(dtype)
            raise ValueError(
                f"{label} holds {wrong}, which {dtype} cannot hold (it holds {info.min} to {info.max})"
            )
        value = cast
    if bounds is not None and ((value < bounds[0]) | (value > bounds[1])).any():
        wrong = value[(value < bounds[0]) | (value > bounds[1])].flat[0]
        raise ValueError(
            f"{label} holds {wrong}, outside the action space (from {bounds[0].min()} to {bounds[1].max()})"
        )
    if finite and dtype.kind in "fc" and not np.isfinite(value).all():
        bad = ~np.isfinite(value)
        other = tuple(i for i in range(bad.ndim) if i != env_axis)
        raise non_finite(label, np.flatnonzero(bad.any(axis=other) if other else bad))
    return value


def non_finite(label: str, envs: Any) -> ValueError:
    return ValueError(
        f"{label} holds non-finite values (NaN or inf) for env(s) {list(map(int, envs))}, which would "
        "poison training; nothing of this step was stored (HerStorage(check_finite=False) stores them)"
    )


def non_finite_rows(values: np.ndarray) -> list[int]:
    """The rows of a 2-d array that hold a non-finite value (none in an array of neither floats nor complex)."""
    return np.flatnonzero(~np.isfinite(values).all(axis=1)).tolist() if values.dtype.kind in "fc" else []


def check_keys(value: Any, specs: Mapping[str, Spec], name: str) -> None:
    """``value`` must be a mapping with exactly the keys of ``specs``."""
    if type(value) is dict and value.keys() == specs.keys():
        return
    keys = sorted(specs)
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict of arrays with the keys {keys}, got {type(value).__name__}")
    if value.keys() != specs.keys():
        missing, unexpected = (
            sorted(specs.keys() - value.keys()),
            sorted(map(str, value.keys() - specs.keys())),
        )
        raise ValueError(
            f"{name} must have the keys {keys} of the observation space: missing {missing}, unexpected {unexpected}"
        )


def field_specs(observation_space: Any) -> dict[str, Spec]:
    """``{key: (shape, dtype)}`` from a ``spaces.Dict`` or a mapping of ``(shape, dtype)`` pairs."""
    items: list[tuple[str, Any]]
    if isinstance(observation_space, spaces.Dict):
        items = [(key, (space.shape, space.dtype)) for key, space in observation_space.spaces.items()]
    elif isinstance(observation_space, Mapping):
        items = list(observation_space.items())
    else:
        raise TypeError(
            "observation_space must be a gymnasium.spaces.Dict or a mapping {key: (shape, dtype)}, "
            f"got {type(observation_space).__name__}"
        )
    specs: dict[str, Spec] = {}
    for key, spec in items:
        try:
            shape, dtype = spec
            specs[key] = (tuple(int(d) for d in shape), np.dtype(dtype))
        except (TypeError, ValueError):
            raise TypeError(
                f"observation_space[{key!r}] has no usable (shape, dtype), got {spec!r}"
            ) from None
    missing = [key for key in ("achieved_goal", "desired_goal") if key not in specs]
    if missing:
        raise ValueError(
            f"observation_space lacks the key(s) {missing}; HER needs 'achieved_goal' and 'desired_goal' "
            f"(it has {list(specs)})"
        )
    if specs["achieved_goal"] != specs["desired_goal"]:
        raise ValueError(
            "observation_space['achieved_goal'] and ['desired_goal'] differ "
            f"({specs['achieved_goal']} vs {specs['desired_goal']}); relabelling puts achieved goals in "
            "place of desired goals, so they need the same shape and dtype"
        )
    return specs


def action_spec(action_space: Any) -> Spec:
    """``(shape, dtype)`` of a gymnasium Space or of a ``(shape, dtype)`` pair."""
    if isinstance(action_space, spaces.Space):
        if action_space.shape is None or action_space.dtype is None:
            raise TypeError(f"action_space {action_space} has no fixed shape and dtype")
        return tuple(action_space.shape), np.dtype(action_space.dtype)
    try:
        shape, dtype = action_space
        return tuple(int(d) for d in shape), np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(
            f"action_space must be a gymnasium Space or a (shape, dtype) pair, got {action_space!r}"
        ) from None


def integer_bounds(space: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(low, high)``, inclusive, of the actions of an integer space (``Discrete``, ``MultiDiscrete``,
    ``MultiBinary``, a ``Box`` of integers); None for other spaces."""
    if isinstance(space, spaces.Discrete):
        return np.asarray(space.start), np.asarray(space.start + space.n - 1)
    if isinstance(space, spaces.MultiDiscrete):
        return space.start, space.start + space.nvec - 1
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, np.int64), np.ones(space.shape, np.int64)
    if isinstance(space, spaces.Box) and space.dtype is not None and np.dtype(space.dtype).kind in "iu":
        return space.low, space.high
    return None


def specs_text(specs: Spec | Mapping[str, Spec]) -> str:
    """``"(3,) float64"``, or ``"{'key': (3,) float64, ...}"`` (sorted) for a mapping of specs."""
    if isinstance(specs, Mapping):
        return "{" + ", ".join(f"{key!r}: {specs_text(spec)}" for key, spec in sorted(specs.items())) + "}"
    return f"{specs[0]} {specs[1]}"


def readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the arrays the storage lends out are written by ``add`` only)."""
    array = array.view()
    array.flags.writeable = False
    return array
