"""BitFlip: flip bits until they match a goal bit string (Andrychowicz et al. 2017, the HER paper).

The task is written once, in :class:`BitFlipTask`: pure functions over a leading batch axis. The
single env (:class:`BitFlipEnv`) is the batch of one and the vector env (:class:`BitFlipVectorEnv`)
the batch of N; both call the same functions, so they cannot disagree.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NoReturn, cast

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs._util import check_bool, check_int
from goalenvs.core import NO_ELAPSED_STEPS, info_values_or_default
from goalenvs.task import Task, TaskEnv, check_finite_action, check_reset_options
from goalenvs.vector import NativeVectorEnv

__all__ = ["OBS_TYPES", "BitFlipEnv", "BitFlipState", "BitFlipTask", "BitFlipVectorEnv"]

ObsType = Literal["bits", "integer", "image"]
#: The accepted values of the ``obs_type`` argument.
OBS_TYPES: tuple[str, ...] = ("bits", "integer", "image")
#: Side of the square greyscale image observation (the same 36 x 36 as stable-baselines3's env).
IMAGE_SIDE = 36
#: The integer observation is a 64-bit ``Discrete(2**n_bits)``; numpy's int64 holds up to 2**62 safely.
MAX_INTEGER_BITS = 62

_U64 = np.uint64


def _constant(value: int, dtype: type) -> np.ndarray:
    """A read-only 0-d array: as an operand of an array operation it costs a third of a numpy scalar
    (no scalar-to-array conversion), which is most of what a step of a small batch spends."""
    array: np.ndarray = np.array(value, dtype)
    array.flags.writeable = False
    return array


_GOLDEN = _constant(0x9E3779B97F4A7C15, _U64)
_MIX1 = _constant(0xBF58476D1CE4E5B9, _U64)
_MIX2 = _constant(0x94D049BB133111EB, _U64)
_SHIFT27, _SHIFT30, _SHIFT31 = _constant(27, _U64), _constant(30, _U64), _constant(31, _U64)
_ONE_F32 = _constant(1, np.float32)
_ONE_U8 = _constant(1, np.uint8)
_ONE_I64 = _constant(1, np.int64)
_ONE_U64 = _constant(1, _U64)
_NO_ROWS = np.zeros(0, np.intp)
_NO_ROWS.flags.writeable = False


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on a uint64 array: a bijective hash with good avalanche (wraps mod 2**64)."""
    z = x + _GOLDEN
    # New arrays, not in place: numpy's in-place operations on a small array cost several times more.
    z = (z ^ (z >> _SHIFT30)) * _MIX1
    z = (z ^ (z >> _SHIFT27)) * _MIX2
    return z ^ (z >> _SHIFT31)


def _fold_seed(seed: int) -> int:
    """A seed >= 0 as 64 bits: itself below 2**64, else 64 bits of ``np.random.SeedSequence(seed)``'s
    state (so seeds that differ only above bit 64 still differ)."""
    if seed < 2**64:
        return seed
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])


def seed_keys(seeds: np.ndarray) -> np.ndarray:
    """Random-stream keys (uint64) for integer seeds >= 0 of any size, one per env (an int array, or an
    object array of Python ints; see :func:`goalenvs.task.seed_array`)."""
    seeds = np.asarray(seeds)
    if seeds.dtype == object:
        seeds = np.array([_fold_seed(int(seed)) for seed in seeds.tolist()], dtype=_U64)
    return _splitmix64(seeds.astype(_U64))


def random_bits(keys: np.ndarray, counters: np.ndarray, n_bits: int) -> np.ndarray:
    """Uniform random bits of shape ``(B, n_bits)`` (uint8): draw number ``counters[i]`` of stream ``keys[i]``.

    Why a counter-based generator and not one ``np.random.Generator`` per env: every env's draws depend
    only on its own (key, counter), so env ``i`` of a vector env seeded with ``s`` replays exactly what a
    single env seeded with ``s + i`` does, while all N envs still draw in one array operation.
    Word ``w`` of a draw is SplitMix64's ``w``-th output from the start point ``key ^ counter * odd``.
    """
    n_words = -(-n_bits // 64)
    start = (keys ^ (counters * _MIX1))[:, None]
    words_u64 = _splitmix64(start if n_words == 1 else start + np.arange(n_words, dtype=_U64) * _GOLDEN)
    if sys.byteorder != "little":  # fix the byte order so a seed gives the same bits on every platform
        words_u64 = words_u64.byteswap()
    as_bytes = words_u64.view(np.uint8)
    return np.unpackbits(as_bytes, axis=1, count=n_bits, bitorder="little")


def rows_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether ``a[..., :]`` equals ``b[..., :]`` row by row (same shapes); bool of shape ``a.shape[:-1]``.

    Equal raw bytes <=> equal values when the dtypes match and are integers or bools (not floats:
    NaN's bytes equal NaN's, -0.0's differ from 0.0's), and comparing each row's bytes as one
    value is cheaper than an ``all`` reduction over a short last axis.
    """
    if a.dtype == b.dtype and a.dtype.kind in "biu" and a.flags.c_contiguous and b.flags.c_contiguous:
        if a.ndim == 1:
            # A numpy bool standing for the 0-d result (as info_values' scalars do): cheaper than a 0-d array.
            return cast(np.ndarray, np.bool_(a.tobytes() == b.tobytes()))
        if a.size == a.shape[-1]:  # a batch of one row
            equal = a.tobytes() == b.tobytes()
            return np.array([equal]) if a.ndim == 2 else np.full(a.shape[:-1], equal)
        row = np.dtype((np.void, a.shape[-1] * a.itemsize))
        return (a.view(row) == b.view(row))[..., 0]
    return (a == b).all(axis=-1)


def _refuse_discrete(actions: np.ndarray, name: str, accepted: str) -> NoReturn:
    """The one-line error for a discrete ``action`` (one env's) or ``actions`` (a batch) refused."""
    if name == "action":
        raise ValueError(f"a discrete action must be {accepted}, got {actions.item()}")
    raise ValueError(f"discrete actions must be {accepted}, got {actions!r}")


class BitFlipState:
    """The state of ``n`` BitFlip envs: bits and goals ``(n, n_bits)`` uint8 0/1, each env's random
    stream (a key and a counter, see :func:`random_bits`) and its step count."""

    def __init__(self, n: int, n_bits: int) -> None:
        self.bits = np.zeros((n, n_bits), np.uint8)
        self.goal = np.ones((n, n_bits), np.uint8)
        self.keys = np.zeros(n, _U64)
        self.counters = np.zeros(n, _U64)
        self.steps = np.zeros(n, np.int64)


@dataclass(frozen=True)
class BitFlipTask(Task):
    """The BitFlip task, written once as pure functions over a leading batch axis.

    Internally a state and a goal are ``uint8`` arrays of 0/1 of shape ``(..., n_bits)``; observations
    encode them as ``obs_type`` says. See :class:`BitFlipEnv` for the meaning of each field.
    """

    reset_option_keys: ClassVar[tuple[str, ...]] = ("goal", "state")
    n_bits: int = 10
    continuous: bool = False
    max_steps: int | None = None
    obs_type: ObsType = "bits"
    channel_first: bool = True
    random_goal: bool = True
    #: Shape of one observation/goal, the trailing dimensions of a batch (derived from obs_type).
    goal_shape: tuple[int, ...] = field(init=False, default=())
    _powers: np.ndarray = field(init=False, repr=False, compare=False)  # set by __post_init__
    _starts_cache: dict[int, np.ndarray] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        check_int("n_bits", self.n_bits, 1)
        check_bool("continuous", self.continuous)
        check_bool("channel_first", self.channel_first)
        check_bool("random_goal", self.random_goal)
        if self.max_steps is None:
            object.__setattr__(self, "max_steps", self.n_bits)
        else:
            check_int("max_steps", self.max_steps, 1)
        if self.obs_type not in OBS_TYPES:
            raise ValueError(f"obs_type must be one of {list(OBS_TYPES)}, got {self.obs_type!r}")
        if self.obs_type == "integer" and self.n_bits > MAX_INTEGER_BITS:
            raise ValueError(
                f"n_bits={self.n_bits} is too large for obs_type='integer' (an int64 observation holds at most "
                f"{MAX_INTEGER_BITS} bits); use n_bits <= {MAX_INTEGER_BITS} or obs_type='bits'"
            )
        if self.obs_type == "image" and self.n_bits > IMAGE_SIDE * IMAGE_SIDE:
            raise ValueError(
                f"n_bits={self.n_bits} does not fit the {IMAGE_SIDE}x{IMAGE_SIDE} image of obs_type='image' "
                f"(one pixel per bit); use n_bits <= {IMAGE_SIDE * IMAGE_SIDE} or obs_type='bits'"
            )
        # Constants the hot path reuses (a frozen dataclass, so set through object.__setattr__).
        object.__setattr__(
            self, "_powers", np.left_shift(np.int64(1), np.arange(self.n_bits, dtype=np.int64))
        )
        if self.obs_type == "bits":
            goal_shape: tuple[int, ...] = (self.n_bits,)
        elif self.obs_type == "integer":
            goal_shape = ()
        else:
            goal_shape = (1, IMAGE_SIDE, IMAGE_SIDE) if self.channel_first else (IMAGE_SIDE, IMAGE_SIDE, 1)
        object.__setattr__(self, "goal_shape", goal_shape)
        help_ = "a bit flips where its number is > 0" if self.continuous else "the index of the bit to flip"
        object.__setattr__(self, "action_help", help_)

    # ----------------------------------------------------------------------------------- spaces

    def goal_space(self) -> spaces.Space:
        """The space of one goal (and of the ``observation`` entry), as ``obs_type`` encodes bits."""
        if self.obs_type == "bits":
            return spaces.MultiBinary(self.n_bits)
        if self.obs_type == "integer":
            return spaces.Discrete(2**self.n_bits)
        return spaces.Box(0, 255, self.goal_shape, np.uint8)

    @property
    def observation_space(self) -> spaces.Dict:
        return spaces.Dict(
            {
                "observation": self.goal_space(),
                "achieved_goal": self.goal_space(),
                "desired_goal": self.goal_space(),
            }
        )

    @property
    def action_space(self) -> spaces.Space:
        if self.continuous:
            return spaces.Box(-1.0, 1.0, (self.n_bits,), np.float32)
        return spaces.Discrete(self.n_bits)

    # ---------------------------------------------------------------------------- randomness
    def sample_start(
        self, keys: np.ndarray, counters: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draw a start state and a goal for each env; returns ``(state, goal, next_counters)``, shape (B, n_bits).

        The start state is uniform over the states that differ from the goal: an episode that starts
        solved teaches nothing, and with few bits it would be common (half the episodes for n_bits=1).
        """
        n = self.n_bits
        bits = random_bits(keys, counters, 2 * n)  # goal and state in one draw
        counters = counters + _ONE_U64
        goal = bits[:, :n] if self.random_goal else np.ones((len(keys), n), np.uint8)
        state = bits[:, n:]
        state, goal = state.copy(), goal.copy()  # contiguous, and not views of one draw
        same = rows_equal(state, goal)
        # count_nonzero costs a fraction of flatnonzero, and a redraw is rare.
        redraw = np.flatnonzero(same) if np.count_nonzero(same) else _NO_ROWS
        while redraw.size:  # rejection sampling: one more round for a fraction 2**-n_bits of the envs
            state[redraw] = random_bits(keys[redraw], counters[redraw], n)
            counters[redraw] += _U64(1)
            redraw = redraw[rows_equal(state[redraw], goal[redraw])]
        return state, goal, counters

    # ------------------------------------------------------------------------------ dynamics
    def check_actions(self, actions: np.ndarray, name: str) -> None:
        """Discrete: integers in ``[0, n_bits)``; continuous: finite numbers (NaN > 0 is False: a NaN
        action would silently flip nothing)."""
        if self.continuous:
            check_finite_action(name, actions, self.action_help)
            return
        if actions.dtype.kind not in "iu":
            _refuse_discrete(actions, name, "one integer" if name == "action" else "integers")
        if actions.size == 1:  # one action (every step of a single env): one Python comparison
            refused = not 0 <= actions.item() < self.n_bits
        else:  # one pass for both bounds: a negative index wraps to a huge unsigned value
            refused = bool((actions.astype(np.uint64, copy=False) >= self.n_bits).any())
        if refused:
            _refuse_discrete(actions, name, f"in [0, {self.n_bits})")

    def flip(self, state: np.ndarray, actions: np.ndarray) -> None:
        """Apply checked actions to ``state`` (B, n_bits) in place.

        Discrete: one integer per env, the index of the bit to flip. Continuous: ``n_bits`` floats per
        env; every bit whose component is > 0 flips.
        """
        if self.continuous:
            state ^= actions > 0
            return
        flat = state.reshape(-1)  # state is C-contiguous: bit j of env i is element i * n_bits + j
        index = actions + self._row_starts(len(state))
        # A gather and a scatter (no index repeats) with a 0-d one: for a batch of one, half the cost
        # of ``flat[index] ^= 1``, and no more for a large batch.
        flat[index] = flat[index] ^ _ONE_U8

    def _row_starts(self, n_envs: int) -> np.ndarray:
        starts = self._starts_cache.get(n_envs)
        if starts is None:
            starts = self._starts_cache[n_envs] = np.arange(n_envs) * self.n_bits
        return starts

    # -------------------------------------------------------------------------- observations
    def encode(self, bits: np.ndarray) -> np.ndarray:
        """Encode 0/1 arrays of shape ``(..., n_bits)`` as observations of shape ``(...) + goal_shape``."""
        if self.obs_type == "bits":
            return bits.astype(np.int8)  # MultiBinary's dtype
        if self.obs_type == "integer":
            return bits.astype(np.int64) @ self._powers
        batch = bits.shape[:-1]
        flat = np.zeros((*batch, IMAGE_SIDE * IMAGE_SIDE), np.uint8)
        flat[..., : self.n_bits] = bits * np.uint8(255)
        return flat.reshape(*batch, *self.goal_shape)

    def _check_goal(self, goal: Any, name: str) -> np.ndarray:
        """``goal`` as an array of shape ``batch_shape + goal_shape``, or a ValueError naming ``name``."""
        goal = goal if type(goal) is np.ndarray else np.asarray(goal)
        if self.obs_type == "integer" and goal.ndim >= 2 and goal.shape[-1] == 1:
            # stable-baselines3 stores a Discrete observation with shape (1,): a batch arrives as (B, 1).
            goal = goal[..., 0]
        trailing = self.goal_shape
        if goal.shape[goal.ndim - len(trailing) :] != trailing or goal.ndim < len(trailing):
            raise ValueError(
                f"{name} must have shape (..., {', '.join(map(str, trailing))}) for obs_type={self.obs_type!r}, "
                f"got {goal.shape}"
            )
        return goal

    def decode(self, goal: Any, name: str = "goal") -> np.ndarray:
        """Decode observations/goals of shape ``batch_shape + goal_shape`` to bool bits ``batch_shape + (n_bits,)``."""
        return self._decode_checked(self._check_goal(goal, name))

    def _decode_checked(self, goal: np.ndarray) -> np.ndarray:
        """:meth:`decode` of goals whose shape ``_check_goal`` has passed."""
        if self.obs_type == "bits":
            return goal != 0
        if self.obs_type == "integer":
            return (goal.astype(np.int64)[..., None] & self._powers) != 0
        flat = goal.reshape(*goal.shape[: goal.ndim - 3], IMAGE_SIDE * IMAGE_SIDE)
        return flat[..., : self.n_bits] > 127

    def observe_bits(self, state: np.ndarray, goal: np.ndarray) -> dict[str, np.ndarray]:
        """The Dict observation for states and goals of shape (B, n_bits)."""
        encoded = self.encode(state)
        return {"observation": encoded, "achieved_goal": encoded.copy(), "desired_goal": self.encode(goal)}

    # ---------------------------------------------------------------- the GoalEnv functions
    def is_success(self, achieved_goal: Any, desired_goal: Any) -> np.ndarray:
        """Whether every bit matches; bool array of ``batch_shape`` (a numpy bool for one transition).

        Goals given as floats (a replay buffer's) are compared by value; one with a NaN or infinite
        entry is no bit string, so it is never a success (reward -1, not terminated).
        """
        ag = achieved_goal if type(achieved_goal) is np.ndarray else np.asarray(achieved_goal)
        dg = desired_goal if type(desired_goal) is np.ndarray else np.asarray(desired_goal)
        if ag.shape != dg.shape:
            raise ValueError(f"achieved_goal {ag.shape} and desired_goal {dg.shape} must have the same shape")
        ag, dg = self._check_goal(ag, "achieved_goal"), self._check_goal(dg, "desired_goal")
        success = self._success_checked(ag, dg)
        if ag.dtype.kind == "f" or dg.dtype.kind == "f":
            success = success & self._finite(ag) & self._finite(dg)
        return success

    def _success_checked(self, ag: np.ndarray, dg: np.ndarray) -> np.ndarray:
        """:meth:`is_success` of goals of one shape that ``_check_goal`` has passed, NaN aside."""
        if self.obs_type == "image":
            return rows_equal(self._decode_checked(ag), self._decode_checked(dg))
        if self.obs_type == "integer":
            return cast(np.ndarray, ag == dg)
        return rows_equal(ag, dg)  # bits are a canonical encoding: compare them as they are

    def _finite(self, goal: np.ndarray) -> np.ndarray:
        """Whether every number of each goal (checked shape) is finite: bool of ``batch_shape``."""
        return np.isfinite(goal).all(axis=tuple(range(goal.ndim - len(self.goal_shape), goal.ndim)))

    @staticmethod
    def reward_of(success: Any) -> Any:
        """The reward of success flags: 0 on success, -1 otherwise (float32, scalar or array)."""
        # One ufunc: a bool minus a float32 one is float32 (1 - 1 = +0.0, 0 - 1 = -1), scalar or array.
        return success - _ONE_F32

    @property
    def _step_limit(self) -> int:
        """``max_steps`` as ``__post_init__`` resolved it (``n_bits`` when None was given)."""
        assert self.max_steps is not None
        return self.max_steps

    def truncated_at(self, elapsed_steps: Any) -> Any:
        """Whether an episode ``elapsed_steps`` long (int or int array) is over by time: ``>= max_steps``."""
        return elapsed_steps >= self.max_steps

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """0 where the achieved goal equals the desired goal, -1 elsewhere; float32 of ``batch_shape``."""
        return self.reward_of(self.is_success(achieved_goal, desired_goal))

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray:
        """True where the goal is reached; bool of ``batch_shape``."""
        return self.is_success(achieved_goal, desired_goal)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """True where ``info["elapsed_steps"] >= max_steps``; bool of ``batch_shape``.

        Truncation is a matter of time, not of goals, so it reads the step count that ``step`` puts in
        the info (a dict, a vector env's dict of arrays, or a sequence of dicts). Where an info has no
        ``"elapsed_steps"`` (or is None) the answer is False, with a warning the first time.
        """
        achieved_goal = self._check_goal(achieved_goal, "achieved_goal")
        batch_shape = achieved_goal.shape[: achieved_goal.ndim - len(self.goal_shape)]
        steps = info_values_or_default(
            info, "elapsed_steps", batch_shape, 0, NO_ELAPSED_STEPS.format(env="BitFlip")
        )
        return self.truncated_at(steps)

    # ------------------------------------------------------ the task's part of the two envs
    def new_state(self, n: int) -> BitFlipState:
        return BitFlipState(n, self.n_bits)

    def seed(self, state: BitFlipState, seeds: np.ndarray, envs: np.ndarray) -> None:
        state.keys[envs] = seed_keys(seeds)
        state.counters[envs] = 0

    def reset(self, state: BitFlipState, envs: np.ndarray, options: dict[str, Any] | None) -> None:
        state.bits[envs], state.goal[envs], state.counters[envs] = self.sample_start(
            state.keys[envs], state.counters[envs]
        )
        state.steps[envs] = 0
        if options:
            self._apply_options(state, envs, options)

    def _apply_options(self, state: BitFlipState, envs: np.ndarray, options: dict[str, Any]) -> None:
        """``reset(options={"state": bits, "goal": bits})``: either or both set, for every env reset."""
        check_reset_options(options, self.reset_option_keys)
        for key, target in (("state", state.bits), ("goal", state.goal)):
            if key in options:
                bits = np.asarray(options[key])
                if bits.shape != (self.n_bits,) or not np.isin(bits, (0, 1)).all():
                    raise ValueError(
                        f"options[{key!r}] must be {self.n_bits} bits (0/1), got {options[key]!r}"
                    )
                target[envs] = bits

    def step(self, state: BitFlipState, actions: np.ndarray, skip: np.ndarray) -> None:
        if skip.size:  # flip every row (fixed shapes), then put back the rows that restart instead
            before = state.bits[skip].copy()
            self.flip(state.bits, actions)
            state.bits[skip] = before
        else:
            self.flip(state.bits, actions)
        # A new array: for a small batch, numpy's in-place addition costs more.
        state.steps = state.steps + _ONE_I64

    def observe(self, state: BitFlipState) -> dict[str, np.ndarray]:
        return self.observe_bits(state.bits, state.goal)

    def score(self, state: BitFlipState, obs: dict[str, np.ndarray]) -> Any:
        # compute_terminated is is_success; the reward and the time limit follow from it and from the
        # step counts through the functions compute_reward / compute_truncated use.
        # observe's goals have the checked shapes and integer dtypes: is_success without the checks.
        success = self._success_checked(obs["achieved_goal"], obs["desired_goal"])
        steps = state.steps.copy()
        info = {"elapsed_steps": steps, "is_success": success}
        return info, self.reward_of(success), success.copy(), self.truncated_at(steps)

    def render(self, state: BitFlipState, env: int, render_mode: str | None) -> np.ndarray | str | None:
        if render_mode == "rgb_array":
            return _render_rgb(state.bits[env], state.goal[env])
        if render_mode == "ansi":
            return _render_ansi(state.bits[env], state.goal[env], int(state.steps[env]), self._step_limit)
        return None


_ENV_DOC = """
    ## Description
    The state is a string of ``n_bits`` bits and the goal another; each step flips bits. The reward
    is sparse (0 only when every bit matches), so without hindsight relabelling an agent almost never
    sees a success once ``n_bits`` passes ~10: the toy problem that motivates HER (Andrychowicz et
    al., 2017). It fixes what stable-baselines3's ``BitFlippingEnv`` gets wrong: the goal is random
    per episode, ``reset(seed=...)`` seeds it, and ``compute_reward`` / ``compute_terminated`` /
    ``compute_truncated`` are vectorized over any batch shape for every observation type.

    ## Action Space
    ``Discrete(n_bits)``: the index of the bit to flip (one outside ``[0, n_bits)`` raises
    ``ValueError``). With ``continuous=True``, ``Box(-1, 1, (n_bits,), float32)``: every bit whose
    component is > 0 flips; a NaN or infinite component raises ``ValueError``. A refused action
    changes nothing: the env goes on as if it had never been given.

    ## Observation Space
    ``Dict(observation, achieved_goal, desired_goal)``; ``observation`` and ``achieved_goal`` are the
    current bits, ``desired_goal`` the goal bits, each encoded by ``obs_type``:

    * ``"bits"``: ``MultiBinary(n_bits)`` (int8 0/1);
    * ``"integer"``: ``Discrete(2**n_bits)``, bit ``i`` is worth ``2**i`` (n_bits <= 62); the
      ``compute_*`` functions read a trailing axis of length 1 on a 2-d or larger batch (``(B, 1)``,
      the shape in which stable-baselines3 stores Discrete observations) as the goal axis;
    * ``"image"``: ``Box(0, 255, (1, 36, 36), uint8)`` (``(36, 36, 1)`` with ``channel_first=False``),
      a greyscale image whose first ``n_bits`` pixels (row-major) are 255 for a 1 bit, all others 0.

    ## Rewards
    ``compute_reward(achieved_goal, desired_goal, info)``: 0 (float32) where all bits match, -1
    elsewhere. ``step`` returns exactly ``compute_reward(obs["achieved_goal"], obs["desired_goal"], info)``.

    ## Starting State
    The goal is uniform over all bit strings (``random_goal=True``) or all ones
    (``random_goal=False``, stable-baselines3's task). The start state is uniform over the strings
    that differ from the goal. ``reset(options={"state": bits, "goal": bits})`` (0/1 arrays of
    length ``n_bits``) sets either or both instead (in a vector env, for every env).

    ## Episode End
    Terminated when all bits match the goal (``compute_terminated``). Truncated when
    ``info["elapsed_steps"]`` reaches ``max_steps`` (``compute_truncated``); both can be true.
    ``info`` holds ``is_success`` (bool) and ``elapsed_steps`` (int).

    ## Arguments
    * ``n_bits`` (int >= 1, default 10): number of bits.
    * ``continuous`` (bool, default False): Box actions instead of Discrete.
    * ``max_steps`` (int >= 1, default ``n_bits``): episode length before truncation.
    * ``obs_type`` (``"bits"`` | ``"integer"`` | ``"image"``, default ``"bits"``).
    * ``channel_first`` (bool, default True): image layout for ``obs_type="image"``.
    * ``random_goal`` (bool, default True): random goal per episode, else all ones.
    * ``render_mode`` (``None`` | ``"rgb_array"`` | ``"ansi"``).

    ## Version History
    * v0: first release.
"""


def _render_rgb(state: np.ndarray, goal: np.ndarray, cell: int = 16) -> np.ndarray:
    """Two rows of squares, state above goal: bright for 1, dark for 0; state green where it matches."""
    n = state.shape[-1]
    match = state == goal
    top = np.where(state[:, None], [80, 220, 80], [20, 90, 20])
    top = np.where(match[:, None], top, np.where(state[:, None], [230, 70, 70], [100, 25, 25]))
    bottom = np.where(goal[:, None], [235, 235, 235], [45, 45, 45])
    rows = np.stack([top, bottom]).astype(np.uint8)  # (2, n, 3)
    image = np.full((2 * cell + 3 * 2, n * cell + (n + 1) * 2, 3), 128, np.uint8)
    for r in range(2):
        for c in range(n):  # render time only: a handful of squares, not a hot path
            y, x = 2 + r * (cell + 2), 2 + c * (cell + 2)
            image[y : y + cell, x : x + cell] = rows[r, c]
    return image


def _render_ansi(state: np.ndarray, goal: np.ndarray, step: int, max_steps: int) -> str:
    s = "".join(map(str, state.tolist()))
    g = "".join(map(str, goal.tolist()))
    return f"state {s} | goal {g} | {int((state != goal).sum())} bit(s) differ | step {step}/{max_steps}"


class BitFlipEnv(TaskEnv):
    __doc__ = "Flip bits to match a goal bit string: the HER paper's toy task, as a GoalEnv.\n" + _ENV_DOC

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 4}
    _task: BitFlipTask

    @property
    def task(self) -> BitFlipTask:
        """The task: the validated arguments and the functions this env is built from."""
        return self._task

    def __init__(
        self,
        n_bits: int = 10,
        continuous: bool = False,
        max_steps: int | None = None,
        obs_type: ObsType = "bits",
        channel_first: bool = True,
        random_goal: bool = True,
        *,
        render_mode: str | None = None,
    ) -> None:
        task = BitFlipTask(n_bits, continuous, max_steps, obs_type, channel_first, random_goal)
        self._init_task(task, render_mode)


class BitFlipVectorEnv(NativeVectorEnv):
    __doc__ = (
        "N BitFlip envs stepped with array operations (``gym.make_vec('goalenvs/BitFlip-v0', num_envs=N)``).\n"
        + _ENV_DOC
        + """
    ## Vector specifics
    * ``num_envs`` (int >= 1). ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list seeds each env),
      so env ``i`` replays exactly what ``BitFlipEnv`` reset with seed ``s + i`` does.
    * ``autoreset_mode``: ``AutoresetMode.NEXT_STEP`` (default; Gymnasium's), ``SAME_STEP`` or
      ``DISABLED`` (reset ended envs with ``options={"reset_mask": mask}``; torchrl's choice), the
      ``autoreset_mode`` attribute and ``metadata["autoreset_mode"]``. ``info`` is what Gymnasium's ``SyncVectorEnv``
      of ``BitFlipEnv`` returns, key for key: with ``SAME_STEP``, in a step that ends an episode,
      ``info["final_obs"]`` is an object array holding each ended env's last observation dict (None
      elsewhere) and ``info["final_info"]`` their last infos (a dict of arrays with its own masks).
    * ``batched_final_obs`` (opt-in, ``SAME_STEP`` only): ``info["final_obs"]`` is one dict of
      ``(num_envs, ...)`` arrays instead, rows valid where ``info["_final_obs"]`` (no Python object
      per ended env).
    * ``compute_reward`` / ``compute_terminated`` / ``compute_truncated`` are the single env's.
    * ``render()`` returns a tuple of ``num_envs`` frames (``rgb_array``) or text lines (``ansi``).
"""
    )

    metadata = {
        "render_modes": ["rgb_array", "ansi"],
        "render_fps": 4,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }
    _task: BitFlipTask

    @property
    def task(self) -> BitFlipTask:
        """The task: the validated arguments and the functions this env is built from."""
        return self._task

    def __init__(
        self,
        num_envs: int = 1,
        n_bits: int = 10,
        continuous: bool = False,
        max_steps: int | None = None,
        obs_type: ObsType = "bits",
        channel_first: bool = True,
        random_goal: bool = True,
        *,
        render_mode: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batched_final_obs: bool = False,
    ) -> None:
        check_int("num_envs", num_envs, 1)
        task = BitFlipTask(n_bits, continuous, max_steps, obs_type, channel_first, random_goal)
        self._init_vector(task, num_envs, render_mode, autoreset_mode, batched_final_obs)
