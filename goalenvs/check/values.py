"""Comparing, copying and showing what an env returns, for the checks and their messages."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = [
    "QuietGoalFunctions",
    "and_",
    "copy_info",
    "copy_obs",
    "describe_space",
    "first_difference",
    "fmt",
    "same",
]


def fmt(x: Any, limit: int = 60) -> str:
    """A short one-line rendering of a value for messages."""
    if isinstance(x, (np.ndarray, np.number, float, int)) and np.size(x) == 1 and not isinstance(x, bool):
        value = np.asarray(x).reshape(())
        if np.issubdtype(value.dtype, np.number):
            return f"{value.item() + 0:.6g}"  # + 0 turns -0.0 into 0.0
    if isinstance(x, np.ndarray) or np.isscalar(x):
        text = np.array2string(np.asarray(x), precision=4, threshold=8, edgeitems=3, separator=", ")
    else:
        text = repr(x)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def and_(names: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def describe_space(space: Any) -> str:
    """A short rendering of a space (a Box's full bound arrays would swamp a message)."""
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe_space(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, spaces.Box):
        low, high = np.unique(space.low), np.unique(space.high)
        bounds = f"{low[0]:g}..{high[0]:g}, " if low.size == 1 and high.size == 1 else ""
        return f"Box({bounds}shape {space.shape}, {space.dtype})"
    return str(space)


def same(a: Any, b: Any) -> bool:
    """Exact structural equality of observations / rewards (NaN equals NaN)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    try:
        xa, xb = np.asarray(a), np.asarray(b)
    except Exception:  # anything numpy cannot hold is compared with ==
        return bool(a == b)
    if xa.dtype == object or xb.dtype == object:
        return bool(np.all(xa == xb)) if xa.shape == xb.shape else False
    if xa.shape != xb.shape:
        return False
    if np.issubdtype(xa.dtype, np.inexact) or np.issubdtype(xb.dtype, np.inexact):
        return bool(np.array_equal(xa, xb, equal_nan=True))
    return bool(np.array_equal(xa, xb))


def first_difference(a: Any, b: Any) -> str:
    """Which part of two observations / step results differs, for messages: the key, and for arrays of
    one shape the index of the first entry that differs (a long array's rendering would hide it)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in a:
            if k not in b or not same(a[k], b[k]):
                return f"{k!r} {_entry_difference(a[k], b.get(k))}"
    return _entry_difference(a, b)


def _entry_difference(a: Any, b: Any) -> str:
    xa, xb = np.asarray(a), np.asarray(b)
    if xa.shape == xb.shape and xa.size > 1 and xa.dtype != object and xb.dtype != object:
        with np.errstate(invalid="ignore"):
            differs = ~(
                (xa == xb) | (np.isnan(xa) & np.isnan(xb))
                if np.issubdtype(xa.dtype, np.inexact)
                else (xa == xb)
            )
        if differs.any():
            index = tuple(int(i) for i in np.argwhere(differs)[0])
            at = ", ".join(map(str, index))
            va, vb = fmt(xa[index]), fmt(xb[index])
            if va == vb:  # a difference below fmt's 6 digits: show every digit
                va, vb = repr(xa[index].item()), repr(xb[index].item())
            return f"([{at}]: {va} vs {vb}; {int(differs.sum())} of {differs.size} entries differ)"
    return f"({fmt(a)} vs {fmt(b)})"


def copy_obs(obs: Any) -> Any:
    """A copy of an observation that later steps cannot change (arrays copied, dicts rebuilt)."""
    if isinstance(obs, Mapping):
        return {k: copy_obs(v) for k, v in obs.items()}
    if isinstance(obs, np.ndarray):
        return obs.copy()
    return copy.deepcopy(obs)


def copy_info(info: Any) -> Any:
    """A deep copy of an info, or a shallow one where an entry cannot be copied."""
    try:
        return copy.deepcopy(info)
    except Exception:  # an uncopyable entry: keep a shallow copy rather than give up
        return dict(info) if isinstance(info, Mapping) else info


class QuietGoalFunctions:
    """Catch what goal functions warn during a probe call, without spending goalenvs' warn-once slots.

    ``with QuietGoalFunctions() as caught:`` gives the list of warnings raised inside the block.
    """

    def __enter__(self) -> list[warnings.WarningMessage]:
        from goalenvs import core

        self._saved = set(core._WARNED)
        self._catch = warnings.catch_warnings(record=True)
        caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return caught

    def __exit__(self, *exc: Any) -> None:
        from goalenvs import core

        self._catch.__exit__(*exc)
        core._WARNED.clear()
        core._WARNED.update(self._saved)
