"""Row records: the structured dtype of one stored step, the ring of them, and the byte views sampling gathers.

Each row of the ring is one record of a structured dtype: observation entries, action, reward, flags
and episode ordinal side by side, so sampling a row touches one place in memory instead of one per
array (with a million rows, random gathers are bound by cache misses, not by the bytes copied).

Each observation is stored **once**: within an episode the next observation of step ``t`` is the
observation of step ``t + 1``, i.e. the row after it. Sampling therefore gathers a row's record and
the observation fields of the row after it (see :class:`RecordLayout` for the byte views, and
:mod:`her._episodes` for the table that keeps each episode's last next observation).

Nothing here is public API: :class:`her.HerStorage` composes these parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs._util import object_array

__all__ = [
    "ACTION",
    "EPISODE",
    "REWARD",
    "TERMINATED",
    "TRUNCATED",
    "FieldSpec",
    "RecordLayout",
    "Ring",
    "StepCheck",
    "action_spec",
    "field_specs",
    "record_dtype",
]

#: ``(shape, dtype)`` of one field of a record.
FieldSpec = tuple[tuple[int, ...], np.dtype]

GOAL_KEYS = ("achieved_goal", "desired_goal")
# Record field names: "obs:<key>" for observation entries cannot collide with "meta:<name>".
ACTION, REWARD, TERMINATED, TRUNCATED, EPISODE = (
    "meta:action",
    "meta:reward",
    "meta:terminated",
    "meta:truncated",
    "meta:episode",
)


def field_specs(observation_space: Any) -> dict[str, FieldSpec]:
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
    specs: dict[str, FieldSpec] = {}
    for key, spec in items:
        try:
            shape, dtype = spec
            specs[key] = (tuple(int(d) for d in shape), np.dtype(dtype))
        except (TypeError, ValueError):
            raise TypeError(
                f"observation_space[{key!r}] has no usable (shape, dtype), got {spec!r}"
            ) from None
    missing = [key for key in GOAL_KEYS if key not in specs]
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


def action_spec(action_space: Any) -> FieldSpec:
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


def record_dtype(fields: Mapping[str, FieldSpec]) -> np.dtype:
    """The structured dtype of one row record, every field aligned to its item size.

    Fields are placed by decreasing item size, so none needs padding; the record is padded to a
    multiple of 8 bytes, which keeps every field aligned in every row of an array of records.
    """
    names, formats, offsets = [], [], []
    offset = 0
    for name, (shape, dtype) in sorted(fields.items(), key=lambda item: -item[1][1].itemsize):
        names.append(name)
        formats.append((dtype, shape) if shape else dtype)
        offsets.append(offset)
        offset += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    itemsize = max(-(-offset // 8) * 8, 8)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})


def _field(record: np.dtype, name: str) -> tuple[np.dtype, int]:
    """``(dtype, byte offset)`` of field ``name`` of a structured dtype."""
    fields = record.fields
    assert fields is not None  # a record dtype is structured
    dtype, offset = fields[name][:2]
    return dtype, offset


class RecordLayout:
    """The structured dtype of a row record, and the opaque dtypes sampling gathers records as.

    Gathers go through opaque byte views (numpy void items): fancy indexing copies a void item with
    one memcpy, where it copies a structured record field by field, and the per-field views are
    strided arrays, slower to gather from. The gathered bytes are then viewed as records.

    Attributes:
        obs_specs: ``{key: (shape, dtype)}`` of the observation entries.
        action_shape, action_dtype: of the action field.
        obs_names: ``{key: record field name}`` of the observation entries.
        record: the row record (see :func:`record_dtype`).
        next_record: the observation fields of a record, up to the end of the last one rounded up to
            8 bytes (so gathered fields stay aligned, with strides multiples of their item sizes, as
            ``torch.from_numpy`` requires): of a next row only the observation is used, and
            gathering less of it saves memory traffic.
        pair_record: a record then the ``next_record`` of the row after it (fields ``"row"``,
            ``"next"``, and ``"next_bytes"``: the same bytes as ``"next"``, opaque, for overwriting
            them with an episode's final observation).
        goal_view: the dtype to view gathered achieved-goal bytes as arrays ``(B, *goal_shape)``.
        record_bytes, obs_bytes, pair_bytes, goal_bytes: the opaque (void) dtypes of a record, of its
            ``next_record`` part, of a ``pair_record``, and of its achieved goal (at ``goal_offset``).
    """

    def __init__(
        self, obs_specs: Mapping[str, FieldSpec], action_shape: tuple[int, ...], action_dtype: Any
    ) -> None:
        self.obs_specs = dict(obs_specs)
        self.action_shape = tuple(action_shape)
        self.action_dtype = np.dtype(action_dtype)
        self.obs_names = {key: f"obs:{key}" for key in self.obs_specs}
        fields = {self.obs_names[key]: spec for key, spec in self.obs_specs.items()}
        fields[ACTION] = (self.action_shape, self.action_dtype)
        fields[REWARD] = ((), np.dtype(np.float32))
        fields[TERMINATED] = ((), np.dtype(bool))
        fields[TRUNCATED] = ((), np.dtype(bool))
        fields[EPISODE] = ((), np.dtype(np.int64))
        self.record = record = record_dtype(fields)
        size = record.itemsize
        self.record_bytes = np.dtype((np.void, size))

        obs_fields = {name: _field(record, name) for name in self.obs_names.values()}
        obs_end = max(offset + dtype.itemsize for dtype, offset in obs_fields.values())
        obs_end = -(-obs_end // 8) * 8
        self.obs_bytes = np.dtype((np.void, obs_end))
        self.next_record = np.dtype(
            {
                "names": list(obs_fields),
                "formats": [dtype for dtype, _ in obs_fields.values()],
                "offsets": [offset for _, offset in obs_fields.values()],
                "itemsize": obs_end,
            }
        )
        self.pair_record = np.dtype(
            {
                "names": ["row", "next", "next_bytes"],
                "formats": [record, self.next_record, self.obs_bytes],
                "offsets": [0, size, size],
                "itemsize": size + obs_end,
            }
        )
        self.pair_bytes = np.dtype((np.void, size + obs_end))

        goal_shape, goal_dtype = self.obs_specs["achieved_goal"]
        self.goal_offset = _field(record, self.obs_names["achieved_goal"])[1]
        self.goal_bytes = np.dtype((np.void, int(np.prod(goal_shape, dtype=np.int64)) * goal_dtype.itemsize))
        self.goal_view = np.dtype((goal_dtype, goal_shape)) if goal_shape else goal_dtype

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its arguments: the dtypes derive from them.
        return (RecordLayout, (self.obs_specs, self.action_shape, self.action_dtype))

    def obs_views(self, table: np.ndarray) -> dict[str, np.ndarray]:
        """``{key: view}`` of the observation fields of an array of records (views, no copies)."""
        return {key: table[name] for key, name in self.obs_names.items()}

    def byte_views(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Opaque views of an array of records, one item per record: the whole record, its
        observation fields (:attr:`obs_bytes`) and its achieved goal (:attr:`goal_bytes`)."""
        size = self.record.itemsize
        whole = table.view(self.record_bytes)
        observation = np.ndarray(len(table), self.obs_bytes, table, strides=(size,))
        goal = np.ndarray(len(table), self.goal_bytes, table, self.goal_offset, strides=(size,))
        return whole, observation, goal


#: For a field of each dtype kind, the kinds of values accepted (cast on writing): the same kind, or
#: bool and integers into a wider kind. Floats into an integer field would be truncated and anything
#: into a bool field collapsed to True/False, silently: refused. Other kinds need the exact dtype.
_ACCEPTED_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}
_KIND_NAMES = {"b": "bool", "i": "integer", "u": "integer", "f": "float", "c": "complex"}


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its axes of length 1 (which do not change the order of the values)."""
    return tuple(d for d in shape if d != 1)


class StepCheck:
    """Checks the arguments of one :meth:`her.HerStorage.add` before anything is staged.

    Every array needs the shape ``(n_envs, *field shape)``, give or take axes of length 1 (they do
    not reorder the values: ``(n_envs,)`` for a ``(1,)`` field, a scalar flag for one env), and a
    dtype of a kind that casts to the field's without changing what the values mean (see
    ``_ACCEPTED_KINDS``). Observations are dicts with exactly the observation keys.

    With ``check_finite``, the float values that are stored must be finite: observations, actions,
    rewards, and the next observations of a step that ends an episode (within an episode the next
    observation is not stored: the next step's observation is, and it is checked then). Per float
    array one ``np.vdot`` of the array with itself, which NaN or inf anywhere make non-finite (only
    then an exact ``np.isfinite``, which tells a huge but finite value from a bad one).

    Cost: the shapes and dtypes of all the arrays are read and compared in one C-level pass (a
    ``map`` of ``attrgetter``) with the signatures already accepted; only a new signature (the first
    step, or a bad one) takes the careful path, :meth:`check`, which accepts it or explains.

    A bad argument raises ``TypeError`` (not a dict; a dtype of a refused kind) or ``ValueError``
    (keys; shape; non-finite values) in one line naming it, what is expected and what was received.
    """

    _MAX_SIGNATURES = 8  # step signatures remembered as accepted (usually one)

    def __init__(self, layout: RecordLayout, n_envs: int, check_finite: bool) -> None:
        n = n_envs
        self.n_envs = n
        self.check_finite = check_finite
        self.keys = frozenset(layout.obs_specs)
        #: (key, shape, dtype, accepted kinds) of each observation entry
        self.obs = tuple(
            (key, (n, *shape), dtype, _ACCEPTED_KINDS.get(dtype.kind, "\0"))
            for key, (shape, dtype) in layout.obs_specs.items()
        )
        self.action = (
            (n, *layout.action_shape),
            layout.action_dtype,
            _ACCEPTED_KINDS.get(layout.action_dtype.kind, "\0"),
        )
        self.per_env = (n,)
        # A tuple of the observation entries, in one C call (HER spaces have at least two keys).
        self._values = itemgetter(*(key for key, *_ in self.obs))
        self._n_keys = len(self.obs)
        # Of the tuple (*observations, actions, rewards), the float fields (vdot checks them), and of
        # the observations alone, the float ones (of next observations, checked where stored).
        kinds = [dtype.kind for _, _, dtype, _ in self.obs] + [layout.action_dtype.kind, "f"]
        self._floats = _getter([i for i, kind in enumerate(kinds) if kind == "f"])
        self._float_obs = _getter([i for i, kind in enumerate(kinds[:-2]) if kind == "f"])
        # Complex fields, or fields of other kinds, always take the careful path.
        self._fast = all(kind in "biuf" for kind in kinds)
        self._accepted: list[list[tuple[tuple[int, ...], np.dtype]]] = []

    def __call__(
        self,
        observations: Any,
        actions: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        next_observations: Any,
    ) -> None:
        """Check one step (the arguments of ``add`` but ``infos``); raise on the first bad one."""
        try:
            obs = self._values(observations)
            nxt = self._values(next_observations)
            values = (*obs, *nxt, actions, rewards)
            if type(terminateds) is bool and type(truncateds) is bool:  # one env's flags, as Python bools
                done: Any = terminateds or truncateds
            else:
                values += (terminateds, truncateds)
                done = None
            known = (
                list(map(_SIGNATURE, values)) in self._accepted
                and isinstance(observations, dict)
                and isinstance(next_observations, dict)
                and len(observations) == self._n_keys  # no other keys
                and len(next_observations) == self._n_keys
            )
        except (KeyError, IndexError, TypeError, AttributeError):  # not dicts of arrays: check() explains
            known = False
        if not known:
            self.check(observations, actions, rewards, terminateds, truncateds, next_observations)
            return
        if not self.check_finite:
            return
        for v in self._floats((*obs, actions, rewards)):
            if not _isfinite(_vdot(v, v)):
                self.check(observations, actions, rewards, terminateds, truncateds, next_observations)
        if done is None:
            done = _count_nonzero(terminateds) or _count_nonzero(truncateds)
        if done:
            for v in self._float_obs(nxt):
                if not _isfinite(_vdot(v, v)):
                    self.check(observations, actions, rewards, terminateds, truncateds, next_observations)

    def check(
        self,
        observations: Any,
        actions: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        next_observations: Any,
    ) -> None:
        """The careful path: check every argument, exactly; remember the signature of a good step."""
        flags = (terminateds, truncateds)
        self.mapping(observations, "observations")
        self.mapping(next_observations, "next_observations")
        for key, shape, dtype, kinds in self.obs:
            self.array(observations[key], shape, dtype, kinds, "observations", key)
        shape, dtype, kinds = self.action
        self.array(actions, shape, dtype, kinds, "actions")
        self.array(rewards, self.per_env, _FLOAT32, "biuf", "rewards")
        for name, flag in zip(("terminateds", "truncateds"), flags, strict=True):
            self.array(flag, self.per_env, _BOOL, "biu", name, finite=False)
        done = any(np.count_nonzero(flag) for flag in flags)
        for key, shape, dtype, kinds in self.obs:
            self.array(next_observations[key], shape, dtype, kinds, "next_observations", key, finite=done)
        self._remember(observations, actions, rewards, terminateds, truncateds, next_observations)

    def _remember(self, *step: Any) -> None:
        """Accept later steps of the same shapes and dtypes on the fast path."""
        if not self._fast or len(self._accepted) >= self._MAX_SIGNATURES:
            return
        observations, actions, rewards, terminateds, truncateds, next_observations = step
        values = (*self._values(observations), *self._values(next_observations), actions, rewards)
        if not (type(terminateds) is bool and type(truncateds) is bool):
            values += (terminateds, truncateds)
        if all(type(v) is np.ndarray for v in values):
            self._accepted.append(list(map(_SIGNATURE, values)))

    def mapping(self, value: Any, name: str) -> None:
        """Check that ``value`` is a mapping with exactly the observation keys."""
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{name} must be a dict of arrays with the keys {sorted(self.keys)}, got {type(value).__name__}"
            )
        if value.keys() != self.keys:
            missing = sorted(self.keys - value.keys())
            unexpected = sorted(map(str, value.keys() - self.keys))
            raise ValueError(
                f"{name} must have the keys {sorted(self.keys)} of the observation space: "
                f"missing {missing}, unexpected {unexpected}"
            )

    def array(
        self,
        value: Any,
        shape: tuple[int, ...],
        dtype: np.dtype,
        kinds: str,
        name: str,
        key: str | None = None,
        finite: bool = True,
    ) -> None:
        """Check one array argument against ``shape`` and ``dtype`` (``kinds``: the kinds accepted),
        and its values, if ``finite`` and ``check_finite``."""
        if type(value) is not np.ndarray:
            try:
                value = np.asarray(value)
            except (TypeError, ValueError):  # ragged nested lists and the like
                raise ValueError(
                    f"{_label(name, key)} must be an array of shape {shape}, got a {type(value).__name__} "
                    "numpy cannot read as one"
                ) from None
        if value.shape != shape and _squeezed(value.shape) != _squeezed(shape):
            raise ValueError(
                f"{_label(name, key)} must have shape {shape} (n_envs={self.n_envs}, then the space's "
                f"{shape[1:]}), got {value.shape}"
            )
        kind = value.dtype.kind
        if kind not in kinds and value.dtype != dtype:
            accepted = ", ".join(dict.fromkeys(_KIND_NAMES[k] for k in kinds if k in _KIND_NAMES))
            expected = f"{dtype} ({accepted} values accepted)" if accepted else str(dtype)
            raise TypeError(f"{_label(name, key)} must be {expected}, got dtype {value.dtype}")
        if not (finite and self.check_finite) or kind not in "fc":
            return
        is_finite = np.isfinite(value)
        if is_finite.all():
            return
        envs = np.flatnonzero(~is_finite.reshape(self.n_envs, -1).all(axis=1)).tolist()
        raise ValueError(
            f"{_label(name, key)} holds non-finite values (NaN or inf) for env(s) {envs}, which would "
            "poison training; nothing of this step was stored (HerStorage(check_finite=False) stores them)"
        )


def _getter(indices: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """``items -> tuple of items[i] for i in indices``, as one C call where it can."""
    if len(indices) > 1:
        return itemgetter(*indices)
    if len(indices) == 1:
        index = indices[0]
        return lambda items: (items[index],)
    return lambda items: ()


_SIGNATURE = attrgetter("shape", "dtype")
# vdot(v, v): the sum of squares of v's values, which NaN or inf anywhere make NaN or inf; finite, it
# proves every value finite (non-finite, it may also be an overflow: check() then looks exactly).
_vdot = np.vdot
_isfinite = math.isfinite
_count_nonzero = np.count_nonzero


_FLOAT32 = np.dtype(np.float32)
_BOOL = np.dtype(bool)


def _label(name: str, key: str | None) -> str:
    return name if key is None else f"{name}[{key!r}]"


class Ring:
    """The ring: ``steps`` rows of ``n_envs`` records (env ``e``'s step on row ``r`` at ``r * n_envs + e``).

    All environments write one row per step (the lockstep layout of stable-baselines3, so a capacity
    means the same thing). The ring is followed by a copy of its first row (kept by
    :meth:`write`), so the row after any row is ``n_envs`` records on in memory, the ring's last row
    included: sampling reads a row and its next row without wrapping their index.

    Attributes:
        layout: the :class:`RecordLayout` of the records.
        steps, n_envs: rows, and records per row.
        records: ``(steps * n_envs + n_envs,)`` records, the copy of row 0 last.
        infos: ``(steps * n_envs,)`` object array of the kept info dicts, or None when not kept.
        pos: row of the next write; full: whether the ring has wrapped around at least once.

    Views of ``records`` (rebuilt after unpickling): ``rows`` (without the copy), ``fields`` (``{record
    field name: view}`` of ``rows``), ``obs`` (``{key: view}``), ``episode`` (each row's episode
    ordinal), ``terminated``, ``truncated``; ``bytes``, ``next_bytes`` and ``goal_bytes`` (see
    :meth:`RecordLayout.byte_views`); with one env, ``pair_bytes``, whose item ``r`` is row ``r``
    followed by the observation of row ``r + 1`` (the ring's last row pairs with the copy of row 0),
    so one gather reads both, one run of memory per sampled transition. With more envs the next row
    is ``n_envs`` records on, and gathering the records between would cost more than it saves.
    """

    _VIEWS = (
        "rows",
        "fields",
        "obs",
        "episode",
        "terminated",
        "truncated",
        "bytes",
        "next_bytes",
        "goal_bytes",
        "pair_bytes",
    )

    def __init__(self, layout: RecordLayout, steps: int, n_envs: int, keep_infos: bool) -> None:
        self.layout = layout
        self.steps = steps
        self.n_envs = n_envs
        # np.zeros maps zero pages lazily: construction costs O(1), not O(capacity).
        self.records = np.zeros(steps * n_envs + n_envs, layout.record)
        self.infos: np.ndarray | None = np.empty(steps * n_envs, dtype=object) if keep_infos else None
        self.pos = 0
        self.full = False
        self._build_views()

    def _build_views(self) -> None:
        layout, records = self.layout, self.records
        self.rows = rows = records[: self.steps * self.n_envs]
        assert layout.record.names is not None
        self.fields = {name: rows[name] for name in layout.record.names}
        self.obs = {key: self.fields[name] for key, name in layout.obs_names.items()}
        self.episode = self.fields[EPISODE]
        self.terminated = self.fields[TERMINATED]
        self.truncated = self.fields[TRUNCATED]
        self.bytes, self.next_bytes, self.goal_bytes = layout.byte_views(records)
        self.pair_bytes: np.ndarray | None = None
        if self.n_envs == 1:
            self.pair_bytes = np.ndarray(
                len(rows), layout.pair_bytes, records, strides=(layout.record.itemsize,)
            )

    def __getstate__(self) -> dict[str, Any]:
        # Views would be pickled as copies of their data: keep only the records they view.
        state = self.__dict__.copy()
        for name in self._VIEWS:
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build_views()

    def write(self, n_steps: int, blocks: Mapping[str, np.ndarray], infos: Sequence[Any] | None) -> None:
        """Write ``n_steps <= steps`` rows from :attr:`pos` on (wrapping at most once), then advance.

        ``blocks``: ``{record field name: (n_steps * n_envs, ...)}`` in row-major order (every field
        of the record); ``infos``: ``n_steps * n_envs`` info objects, when the ring keeps them.
        """
        n, steps, pos = self.n_envs, self.steps, self.pos
        # The rows from pos to the ring's end, then the rest from row 0.
        head = min(n_steps, steps - pos) * n
        fields = self.fields
        for name, block in blocks.items():
            store = fields[name]
            store[pos * n : pos * n + head] = block[:head]
            if head < len(block):
                store[: len(block) - head] = block[head:]
        if self.infos is not None and infos is not None:
            rows = (pos + np.arange(n_steps)) % steps
            flat = (rows[:, None] * n + np.arange(n)).reshape(-1)
            self.infos[flat] = object_array(infos)
        self.full = self.full or pos + n_steps >= steps
        self.pos = (pos + n_steps) % steps
        self.mirror_first_row()

    def mirror_first_row(self) -> None:
        """Copy the ring's first row after its last (after every write that may touch row 0)."""
        n = self.n_envs
        self.bytes[-n:] = self.bytes[:n]

    @property
    def nbytes(self) -> int:
        """Bytes of the records (and of the info pointers, when kept; not of the dicts)."""
        return self.records.nbytes + (self.infos.nbytes if self.infos is not None else 0)

    @staticmethod
    def planned_nbytes(layout: RecordLayout, steps: int, n_envs: int, keep_infos: bool) -> int:
        """:attr:`nbytes` of a ring of these arguments, without building it."""
        infos = steps * n_envs * np.dtype(object).itemsize if keep_infos else 0
        return (steps * n_envs + n_envs) * layout.record.itemsize + infos
