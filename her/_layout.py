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

from collections.abc import Mapping, Sequence
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
