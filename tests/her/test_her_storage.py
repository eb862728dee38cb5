"""HerStorage: property tests against a plain reference model, and the storage's own API.

Every observation encodes where it comes from: ``[env, episode, step]`` (the achieved goal too, and
the desired goal is ``[env, episode, -1]``), so a sampled batch says exactly which episode and step
each transition, next observation and relabelled goal came from.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from her import GoalSelectionStrategy, HerStorage

SPACE = spaces.Dict(
    {
        "observation": spaces.Box(-np.inf, np.inf, (3,), np.float64),
        "achieved_goal": spaces.Box(-np.inf, np.inf, (3,), np.float64),
        "desired_goal": spaces.Box(-np.inf, np.inf, (3,), np.float64),
    }
)
ACTION_SPACE = spaces.Box(-1, 1, (2,), np.float32)


def reward_fn(achieved_goal, desired_goal, infos):
    return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)


def terminated_fn(achieved_goal, desired_goal, infos):
    return np.all(achieved_goal == desired_goal, axis=-1)


@dataclass
class Episode:
    env: int
    ordinal: int
    first_add: int
    length: int = 0
    complete: bool = False
    flags: list = field(default_factory=list)  # (terminated, truncated) per step


class Recorder:
    """Feeds a storage with encoded steps and keeps the reference list of episodes."""

    def __init__(self, storage: HerStorage, lengths: list[list[int]], kinds: list[bool], bools: bool = False):
        self.storage = storage
        self.bools = bools and storage.n_envs == 1  # one env's flags as Python bools (stable-baselines3's)
        self.n_envs = storage.n_envs
        self.lengths = lengths
        self.kinds = kinds
        self.adds = 0
        self.episodes = [[Episode(e, 0, 0)] for e in range(self.n_envs)]

    def obs(self, env: int, ordinal: int, step: int) -> np.ndarray:
        return np.array([env, ordinal, step], np.float64)

    def step(self) -> None:
        n = self.n_envs
        obs = {key: np.zeros((n, 3)) for key in SPACE.spaces}
        next_obs = {key: np.zeros((n, 3)) for key in SPACE.spaces}
        rewards = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        for env in range(n):
            episode = self.episodes[env][-1]
            if episode.length == 0:
                episode.first_add = self.adds
            t = episode.length
            target = self.lengths[env][episode.ordinal % len(self.lengths[env])]
            obs["observation"][env] = obs["achieved_goal"][env] = self.obs(env, episode.ordinal, t)
            next_obs["observation"][env] = next_obs["achieved_goal"][env] = self.obs(
                env, episode.ordinal, t + 1
            )
            obs["desired_goal"][env] = next_obs["desired_goal"][env] = [env, episode.ordinal, -1]
            rewards[env] = t
            ends = t + 1 == target
            kind = self.kinds[(episode.ordinal + env) % len(self.kinds)]
            terminated[env] = ends and kind
            truncated[env] = ends and not kind
            episode.length += 1
            episode.flags.append((bool(terminated[env]), bool(truncated[env])))
            if ends:
                episode.complete = True
                self.episodes[env].append(Episode(env, episode.ordinal + 1, self.adds + 1))
        actions = np.zeros((n, 2), np.float32)
        flags = (bool(terminated[0]), bool(truncated[0])) if self.bools else (terminated, truncated)
        self.storage.add(obs, actions, rewards, *flags, [{}] * n, next_obs)
        self.adds += 1

    def cut(self) -> None:
        """Mirror of HerStorage.end_episodes."""
        for env in range(self.n_envs):
            episode = self.episodes[env][-1]
            if episode.length:
                episode.complete = True
                terminated, _ = episode.flags[-1]
                episode.flags[-1] = (terminated, not terminated)
                self.episodes[env].append(Episode(env, episode.ordinal + 1, self.adds))

    def sampleable(self) -> dict[tuple[int, int], Episode]:
        """Complete episodes whose every step is among the last steps_per_env adds."""
        oldest_add = self.adds - self.storage.steps_per_env
        return {
            (e.env, e.ordinal): e
            for per_env in self.episodes
            for e in per_env
            if e.complete and e.first_add >= oldest_add
        }


def check_batch(batch: dict, recorder: Recorder, storage: HerStorage, batch_size: int) -> None:
    sampleable = recorder.sampleable()
    obs, nxt = batch["observations"], batch["next_observations"]
    n_relabel = int((1 - 1 / (storage.n_sampled_goal + 1)) * batch_size)
    assert batch["relabelled"].sum() == n_relabel
    assert batch["relabelled"][batch_size - n_relabel :].all()
    for i in range(batch_size):
        env, ordinal, t = obs["observation"][i].astype(int)
        episode = sampleable.get((env, ordinal))
        assert episode is not None, f"sampled ({env}, {ordinal}) which is not a complete, whole episode"
        assert 0 <= t < episode.length
        np.testing.assert_array_equal(nxt["observation"][i], [env, ordinal, t + 1])
        np.testing.assert_array_equal(nxt["achieved_goal"][i], [env, ordinal, t + 1])
        assert (batch["terminateds"][i], batch["truncateds"][i]) == episode.flags[t]
        if not batch["relabelled"][i]:
            np.testing.assert_array_equal(obs["desired_goal"][i], [env, ordinal, -1])
            np.testing.assert_array_equal(nxt["desired_goal"][i], [env, ordinal, -1])
            assert batch["rewards"][i] == t
            continue
        goal = obs["desired_goal"][i]
        np.testing.assert_array_equal(nxt["desired_goal"][i], goal)
        g_env, g_ordinal, g_next = goal.astype(int)
        assert (g_env, g_ordinal) == (env, ordinal), "relabelled goal from another episode"
        j = g_next - 1  # the goal is the next achieved goal of step j
        strategy = storage.goal_selection_strategy
        if strategy is GoalSelectionStrategy.FUTURE:
            assert t <= j < episode.length
        elif strategy is GoalSelectionStrategy.FINAL:
            assert j == episode.length - 1
        else:
            assert 0 <= j < episode.length
        assert batch["rewards"][i] == (0.0 if j == t else -1.0)


def scenario_storage(capacity, n_envs, strategy, n_sampled_goal, seed, **kwargs) -> HerStorage:
    return HerStorage(
        capacity,
        SPACE,
        ACTION_SPACE,
        reward_fn,
        n_envs=n_envs,
        n_sampled_goal=n_sampled_goal,
        goal_selection_strategy=strategy,
        seed=seed,
        **kwargs,
    )


scenario = dict(
    n_envs=st.integers(1, 3),
    capacity=st.integers(1, 40),
    n_steps=st.integers(0, 120),
    lengths=st.lists(st.lists(st.integers(1, 15), min_size=1, max_size=4), min_size=3, max_size=3),
    kinds=st.lists(st.booleans(), min_size=1, max_size=4),
    strategy=st.sampled_from(["future", "final", "episode"]),
    n_sampled_goal=st.integers(0, 4),
    cut=st.booleans(),
    seed=st.integers(0, 2**16),
)


@settings(max_examples=150, deadline=None)
@given(**scenario)
@pytest.mark.filterwarnings("ignore:an episode of env")  # episodes longer than tiny rings, on purpose
def test_samples_match_the_reference(
    n_envs, capacity, n_steps, lengths, kinds, strategy, n_sampled_goal, cut, seed
):
    storage = scenario_storage(capacity, n_envs, strategy, n_sampled_goal, seed)
    recorder = Recorder(storage, lengths[:n_envs], kinds, bools=seed % 2 == 1)
    for _ in range(n_steps):
        recorder.step()
    if cut:
        storage.end_episodes()
        recorder.cut()
    sampleable = recorder.sampleable()
    assert storage.num_sampleable == sum(e.length for e in sampleable.values())
    assert sorted(storage.episode_lengths().tolist()) == sorted(e.length for e in sampleable.values())
    if not sampleable:
        # Nothing to sample: because an episode outgrew the ring (the longest is named), or
        # because no episode has ended yet.
        outgrown = [e.length for per_env in recorder.episodes for e in per_env]
        longest = max((n for n in outgrown if n > storage.steps_per_env), default=0)
        reason = (
            f"has reached {longest} steps, more than the {storage.steps_per_env} steps"
            if longest
            else "before the end of the first episode"
        )
        with pytest.raises(RuntimeError, match=reason):
            storage.sample(8)
        return
    check_batch(storage.sample(64), recorder, storage, 64)
    # Keep adding after sampling (and after a cut): the storage must stay consistent.
    for _ in range(7):
        recorder.step()
    if recorder.sampleable():
        check_batch(storage.sample(33), recorder, storage, 33)


def check_next_steps(batch: dict, recorder: Recorder, n_step: int, recompute: bool) -> None:
    """The ``nstep_*`` arrays against the reference: step ``t + k - 1`` and state ``s_{t+k}`` of the
    transition's episode, clipped to its last step, under the transition's (new) goal."""
    sampleable = recorder.sampleable()
    obs, nxt = batch["observations"], batch["nstep_observations"]
    for i in range(len(batch["rewards"])):
        env, ordinal, t = obs["observation"][i].astype(int)
        episode, goal = sampleable[(env, ordinal)], obs["desired_goal"][i]
        for k in range(1, n_step + 1):
            kk = min(k, episode.length - t)  # clipped to the episode's last step
            assert batch["nstep_valid"][i, k - 1] == float(k == kk)
            for key in ("observation", "achieved_goal"):
                np.testing.assert_array_equal(nxt[key][i, k - 1], [env, ordinal, t + kk])
            np.testing.assert_array_equal(nxt["desired_goal"][i, k - 1], goal)
            terminated = episode.flags[t + kk - 1][0]
            if batch["relabelled"][i]:
                reached = np.array_equal(goal, [env, ordinal, t + kk])
                assert batch["nstep_rewards"][i, k - 1] == (0.0 if reached else -1.0)
                terminated = reached if recompute else terminated
            else:
                assert batch["nstep_rewards"][i, k - 1] == t + kk - 1  # the stored reward
            assert batch["nstep_terminateds"][i, k - 1] == float(terminated)
        np.testing.assert_array_equal(nxt["observation"][i, 0], batch["next_observations"]["observation"][i])
        assert batch["nstep_rewards"][i, 0] == batch["rewards"][i]


@settings(max_examples=80, deadline=None)
@given(**scenario, n_step=st.integers(1, 6), recompute=st.booleans())
@pytest.mark.filterwarnings("ignore:an episode of env")
def test_next_steps_match_the_reference(
    n_envs, capacity, n_steps, lengths, kinds, strategy, n_sampled_goal, cut, seed, n_step, recompute
):
    """``sample(B, n_step)``: the batch of ``sample(B)`` (same seed), plus the episode's next n steps."""
    storages = [
        scenario_storage(
            capacity,
            n_envs,
            strategy,
            n_sampled_goal,
            seed,
            recompute_terminated=recompute,
            terminated_fn=terminated_fn,
        )
        for _ in range(2)
    ]
    recorders = [Recorder(storage, lengths[:n_envs], kinds) for storage in storages]
    for _ in range(n_steps):
        for recorder in recorders:
            recorder.step()
    if cut:
        for storage, recorder in zip(storages, recorders, strict=True):
            storage.end_episodes()
            recorder.cut()
    if not recorders[0].sampleable():
        return
    plain, batch = storages[0].sample(40), storages[1].sample(40, n_step)
    for key, value in plain.items():
        if isinstance(value, dict):
            for name in value:
                np.testing.assert_array_equal(batch[key][name], value[name])
        else:
            np.testing.assert_array_equal(batch[key], value)
    if n_step == 1:
        assert "nstep_rewards" not in batch
        return
    check_next_steps(batch, recorders[1], n_step, recompute)


@settings(max_examples=60, deadline=None)
@given(**scenario)
@pytest.mark.filterwarnings("ignore:an episode of env")
def test_extend_equals_add_step_by_step(
    n_envs, capacity, n_steps, lengths, kinds, strategy, n_sampled_goal, cut, seed
):
    """A block given to extend (in pieces of any size) stores what the same steps given to add do."""
    _extend_and_add(n_envs, capacity, n_steps, lengths, kinds, strategy, n_sampled_goal, cut, seed)


@pytest.mark.filterwarnings("ignore:an episode of env")
def test_extend_equals_add_when_an_outgrown_episode_overwrote_an_ended_one():
    # Found by Hypothesis: the rows an outgrown episode wrote over an ended one once kept its id.
    _extend_and_add(3, 30, 15, [[1], [1, 3], [4, 11]], [False], "future", 0, False, 1)


def _extend_and_add(n_envs, capacity, n_steps, lengths, kinds, strategy, n_sampled_goal, cut, seed):
    storages = []
    for blocks in (False, True):
        storage = scenario_storage(capacity, n_envs, strategy, n_sampled_goal, seed)
        recorder = Recorder(storage, lengths[:n_envs], kinds, bools=seed % 2 == 1)
        steps = []
        storage.add = lambda *step, steps=steps: steps.append(step)  # collect the steps the recorder makes
        for _ in range(n_steps):
            recorder.step()
        del storage.add
        pieces = (
            [steps[i : i + 1 + seed % 37] for i in range(0, len(steps), 1 + seed % 37)]
            if blocks
            else [[s] for s in steps]
        )
        for piece in pieces:
            if blocks:
                storage.extend(*(_stacked([step[i] for step in piece]) for i in range(7)))
            else:
                storage.add(*piece[0])
        if cut:
            storage.end_episodes()
        storages.append(storage)
    assert_same_storage(*storages)


def _stacked(values: list) -> object:
    if values[0] is None or isinstance(values[0], list):
        return values
    if isinstance(values[0], dict):
        return {key: np.stack([v[key] for v in values]) for key in values[0]}
    return np.stack(values)


def make_storage(**kwargs) -> HerStorage:
    kwargs.setdefault("seed", 0)
    return HerStorage(kwargs.pop("capacity", 100), SPACE, ACTION_SPACE, reward_fn, **kwargs)


def fill(storage: HerStorage, n_steps: int, episode_length: int = 5) -> Recorder:
    recorder = Recorder(storage, [[episode_length]] * storage.n_envs, [False])
    for _ in range(n_steps):
        recorder.step()
    return recorder


def test_relabelled_share_is_stable_baselines3s():
    for k, batch in [(4, 256), (1, 7), (0, 10), (3, 2048), (2, 1)]:
        storage = make_storage(n_sampled_goal=k)
        fill(storage, 20)
        expected = int((1 - 1.0 / (k + 1)) * batch)
        assert storage.sample(batch)["relabelled"].sum() == expected


def test_seeded_generator_is_reproducible_and_leaves_global_state_alone():
    a, b = make_storage(seed=7), make_storage(seed=7)
    fill(a, 40)
    fill(b, 40)
    state = np.random.get_state()[1].copy()  # noqa: NPY002  (checking the global state is untouched)
    first, second = a.sample(64), b.sample(64)
    np.testing.assert_array_equal(first["observations"]["observation"], second["observations"]["observation"])
    np.testing.assert_array_equal(
        first["observations"]["desired_goal"], second["observations"]["desired_goal"]
    )
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    c = make_storage(seed=8)
    fill(c, 40)
    assert not np.array_equal(
        c.sample(64)["observations"]["observation"], first["observations"]["observation"]
    )


def test_recompute_terminated_flags_reached_goals():
    storage = make_storage(recompute_terminated=True, terminated_fn=terminated_fn, n_sampled_goal=4)
    recorder = fill(storage, 40)
    batch = storage.sample(500)
    relabelled = batch["relabelled"]
    obs, goal = batch["observations"]["observation"], batch["observations"]["desired_goal"]
    reached = goal[:, 2] - 1 == obs[:, 2]  # the goal is this step's own outcome
    assert reached[relabelled].any() and (~reached[relabelled]).any()
    np.testing.assert_array_equal(batch["terminateds"][relabelled], reached[relabelled].astype(np.float32))
    # Real transitions keep their stored flag (all episodes here end truncated, never terminated).
    assert not batch["terminateds"][~relabelled].any()
    assert recorder.sampleable()


def test_recompute_terminated_needs_a_function():
    with pytest.raises(ValueError, match="terminated_fn"):
        make_storage(recompute_terminated=True)


def test_infos_reach_reward_fn_only_when_copied():
    seen = []

    def spy(achieved, desired, infos):
        seen.append(infos)
        return reward_fn(achieved, desired, infos)

    for copy in (False, True):
        storage = HerStorage(50, SPACE, ACTION_SPACE, spy, copy_info_dict=copy, seed=0)
        obs = {key: np.zeros((1, 3)) for key in SPACE.spaces}
        for t in range(10):
            obs = {key: np.full((1, 3), t, np.float64) for key in SPACE.spaces}
            nxt = {key: np.full((1, 3), t + 1, np.float64) for key in SPACE.spaces}
            storage.add(obs, np.zeros((1, 2)), [0.0], [False], [t == 9], [{"t": t}], nxt)
        storage.sample(16)
    assert seen[0] is None
    infos = seen[1]
    assert isinstance(infos, np.ndarray) and infos.dtype == object and len(infos) == 12
    assert all(isinstance(info, dict) and 0 <= info["t"] < 10 for info in infos)


def test_gymnasium_vector_infos_are_split_per_env():
    seen = []

    def spy(achieved, desired, infos):
        seen.append(infos)
        return reward_fn(achieved, desired, infos)

    storage = HerStorage(40, SPACE, ACTION_SPACE, spy, n_envs=2, copy_info_dict=True, seed=0)
    for t in range(4):
        obs = {key: np.full((2, 3), t, np.float64) for key in SPACE.spaces}
        nxt = {key: np.full((2, 3), t + 1, np.float64) for key in SPACE.spaces}
        infos = {"t": np.array([t, 10 + t]), "_t": np.array([True, True])}
        storage.add(obs, np.zeros((2, 2)), [0.0, 0.0], [False, False], [t == 3, t == 3], infos, nxt)
    storage.sample(20)
    assert {info["t"] for info in seen[0]} <= {0, 1, 2, 3, 10, 11, 12, 13}


def test_caller_arrays_are_copied():
    storage = make_storage()
    obs = {key: np.zeros((1, 3)) for key in SPACE.spaces}
    nxt = {key: np.ones((1, 3)) for key in SPACE.spaces}
    storage.add(obs, np.zeros((1, 2)), [0.0], [False], [True], None, nxt)
    obs["observation"][:] = 42.0  # the caller reuses its buffer
    nxt["observation"][:] = 42.0
    batch = storage.sample(4)
    assert (batch["observations"]["observation"] == 0.0).all()
    assert (batch["next_observations"]["observation"] == 1.0).all()


def test_pickle_round_trip_keeps_steps_and_generator():
    storage = make_storage()
    fill(storage, 23)
    clone = pickle.loads(pickle.dumps(storage))
    a, b = storage.sample(40), clone.sample(40)
    np.testing.assert_array_equal(a["observations"]["observation"], b["observations"]["observation"])
    np.testing.assert_array_equal(a["rewards"], b["rewards"])


@pytest.mark.parametrize("n_envs", [1, 3])
def test_episode_across_the_ring_end_continues_on_row_0(n_envs):
    # 12 rows per env, 5-step episodes: after 20 adds, episode 2 lies on rows 10, 11, 0, 1, 2, so the
    # next observation of its step on the ring's last row is row 0's (read through the copy of row 0
    # kept after the ring).
    storage = make_storage(capacity=12 * n_envs, n_envs=n_envs)
    recorder = fill(storage, 20)
    batch = storage.sample(2000)
    _, ordinal, step = batch["observations"]["observation"].T
    assert ((ordinal == 2) & (step == 1)).any()
    check_batch(batch, recorder, storage, 2000)
    # Row 0 rewritten: episode 4 now lies on rows 8, 9, 10, 11, 0, its step on row 11 continues on
    # the new row 0 (the copy must follow).
    for _ in range(5):
        recorder.step()
    batch = storage.sample(2000)
    _, ordinal, step = batch["observations"]["observation"].T
    assert ((ordinal == 4) & (step == 3)).any()
    check_batch(batch, recorder, storage, 2000)


@pytest.mark.parametrize("n_envs", [1, 2])
def test_small_fields_sample_right_and_aligned(n_envs):
    # Observation fields of a few bytes (BitFlip-like) next to 8-byte ones: the next row's
    # observation is gathered up to its last field, rounded to keep every field aligned.
    space = {
        "observation": ((5,), np.uint8),
        "achieved_goal": ((3,), np.int8),
        "desired_goal": ((3,), np.int8),
    }
    storage = HerStorage(30 * n_envs, space, ((1,), np.float64), reward_fn, n_envs=n_envs, seed=0)
    for k in range(47):  # wraps around; 4-step episodes, observation k, next observation k + 1
        obs = {key: np.full((n_envs, *shape), k, dtype) for key, (shape, dtype) in space.items()}
        nxt = {key: np.full((n_envs, *shape), k + 1, dtype) for key, (shape, dtype) in space.items()}
        ends = np.full(n_envs, k % 4 == 3)
        storage.add(obs, np.zeros((n_envs, 1)), np.zeros(n_envs), ends, ends, None, nxt)
    batch = storage.sample(500)
    obs, nxt = batch["observations"], batch["next_observations"]
    np.testing.assert_array_equal(nxt["observation"], obs["observation"] + 1)
    np.testing.assert_array_equal(nxt["achieved_goal"], obs["achieved_goal"] + 1)
    arrays = [*obs.values(), *nxt.values(), batch["actions"], batch["rewards"], batch["terminateds"]]
    for array in arrays:
        assert all(stride % array.itemsize == 0 for stride in array.strides)
        assert array.flags.aligned


def assert_same_storage(a: HerStorage, b: HerStorage) -> None:
    """Same positions, episodes, rows and (from generators in the same state) the same samples."""
    assert (a.pos, a.full, a.num_transitions, a.num_sampleable) == (
        b.pos,
        b.full,
        b.num_transitions,
        b.num_sampleable,
    )
    np.testing.assert_array_equal(a.episode_lengths(), b.episode_lengths())
    np.testing.assert_array_equal(a.current_episode_lengths, b.current_episode_lengths)
    np.testing.assert_array_equal(a.current_episode_starts, b.current_episode_starts)
    for name in ("observations", "next_observations", "actions", "rewards", "terminateds", "truncateds"):
        x, y = a.rows(name), b.rows(name)
        for key in x if isinstance(x, dict) else [None]:
            np.testing.assert_array_equal(x if key is None else x[key], y if key is None else y[key])
    for name in ("episode_starts", "episode_lengths", "infos"):
        np.testing.assert_array_equal(a.rows(name), b.rows(name))
    if a.num_sampleable:
        x, y = a.sample(300), b.sample(300)
        for key in ("observations", "next_observations"):
            for sub in x[key]:
                np.testing.assert_array_equal(x[key][sub], y[key][sub])
        for key in ("actions", "rewards", "terminateds", "truncateds", "relabelled"):
            np.testing.assert_array_equal(x[key], y[key])


def test_functions_given_later_and_pickled_only_when_asked():
    storage = HerStorage(100, SPACE, ACTION_SPACE, None, recompute_terminated=True, seed=0)
    fill(storage, 20)
    with pytest.raises(RuntimeError, match="set_functions"):
        storage.sample(8)
    with pytest.raises(ValueError, match="recompute_terminated=True needs terminated_fn"):
        storage.set_functions(reward_fn)
    with pytest.raises(TypeError, match="terminated_fn must be callable"):
        storage.set_functions(reward_fn, "compute_terminated")
    storage.set_functions(reward_fn, terminated_fn)
    assert storage.sample(8)["relabelled"].sum() == 6
    assert storage.pickle_functions
    assert pickle.loads(pickle.dumps(storage)).reward_fn is reward_fn
    storage.pickle_functions = False
    clone = pickle.loads(pickle.dumps(storage))
    assert clone.reward_fn is None and clone.terminated_fn is None and not clone.pickle_functions
    assert storage.reward_fn is reward_fn and storage.terminated_fn is terminated_fn
    built = make_storage(pickle_functions=False)
    assert pickle.loads(pickle.dumps(built)).reward_fn is None
    storage.terminated_fn = None  # set by hand: sampling says what is missing
    with pytest.raises(RuntimeError, match="no terminated_fn"):
        storage.sample(8)


def test_current_episodes_are_read_only():
    storage = make_storage(n_envs=2, capacity=40)
    fill(storage, 23)  # 5-step episodes: 3 steps into the fifth
    lengths = storage.current_episode_lengths
    np.testing.assert_array_equal(lengths, [3, 3])
    np.testing.assert_array_equal(storage.current_episode_starts, [0, 0])
    with pytest.raises(ValueError, match="read-only"):
        lengths[0] = 0
    assert storage.end_episodes().tolist() == [0, 1]
    np.testing.assert_array_equal(storage.current_episode_lengths, [0, 0])


def test_reset_forgets_everything():
    storage = make_storage()
    fill(storage, 30)
    storage.reset()
    assert storage.num_transitions == 0 and storage.num_sampleable == 0
    with pytest.raises(RuntimeError):
        storage.sample(2)


def test_torch_output_on_device():
    torch = pytest.importorskip("torch")
    storage = make_storage(device="cpu")
    fill(storage, 20)
    batch = storage.sample(8)
    assert isinstance(batch["rewards"], torch.Tensor)
    assert batch["observations"]["observation"].shape == (8, 3)
    assert batch["observations"]["observation"].dtype == torch.float64


def test_cuda_output_when_available():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    storage = make_storage(device="cuda")
    fill(storage, 20)
    batch = storage.sample(8)
    assert batch["actions"].device.type == "cuda"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(capacity=0), ValueError, "capacity must be >= 1"),
        (dict(capacity=2.5), TypeError, "capacity must be an int"),
        (dict(n_envs=0), ValueError, "n_envs"),
        (dict(n_sampled_goal=-1), ValueError, "n_sampled_goal"),
        (dict(goal_selection_strategy="futur"), ValueError, "accepted values"),
        (dict(goal_selection_strategy=3), TypeError, "goal_selection_strategy"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_storage(**kwargs)


def test_bad_spaces_are_named():
    with pytest.raises(ValueError, match="achieved_goal"):
        HerStorage(10, spaces.Dict({"observation": spaces.Box(0, 1, (2,))}), ACTION_SPACE, reward_fn)
    mismatched = spaces.Dict(
        {"achieved_goal": spaces.Box(0, 1, (2,)), "desired_goal": spaces.Box(0, 1, (3,))}
    )
    with pytest.raises(ValueError, match="same shape and dtype"):
        HerStorage(10, mismatched, ACTION_SPACE, reward_fn)
    with pytest.raises(TypeError, match="spaces.Dict"):
        HerStorage(10, spaces.Box(0, 1, (2,)), ACTION_SPACE, reward_fn)


def test_bad_add_shapes_are_named():
    # Refused by add() itself (tests/her/test_storage_robustness.py has the other cases).
    storage = make_storage()
    obs = {key: np.zeros((1, 4)) for key in SPACE.spaces}
    with pytest.raises(ValueError, match=r"observations\['achieved_goal'\] must have shape \(1, 3\)"):
        storage.add(obs, np.zeros((1, 2)), [0.0], [False], [False], None, obs)
    assert storage.num_transitions == 0


@pytest.mark.parametrize("mode", ["vector_entry_point", "sync"])
def test_from_gymnasium_vector_env(mode):
    import gymnasium as gym

    import goalenvs  # noqa: F401  (registers goalenvs/BitFlip-v0)

    same_step = gym.vector.AutoresetMode.SAME_STEP
    if mode == "sync":
        kwargs = dict(vector_kwargs={"autoreset_mode": same_step})
    else:
        kwargs = dict(autoreset_mode=same_step)
    env = gym.make_vec("goalenvs/BitFlip-v0", num_envs=3, vectorization_mode=mode, n_bits=6, **kwargs)
    storage = HerStorage.from_env(env, 300, seed=0, recompute_terminated=True)
    assert storage.n_envs == 3 and storage.terminated_fn is not None
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.integers(0, 6, 3)
        next_obs, rewards, terminated, truncated, infos = env.step(actions)
        # Same-step autoreset: an ended env's last observation is in info["final_obs"].
        final = {key: value.copy() for key, value in next_obs.items()}
        if "_final_obs" in infos:
            ended = infos["_final_obs"]
            for key in final:
                # Gymnasium's layout, from SyncVectorEnv and native vector envs alike: an object
                # array of per-env observation dicts (None where no episode ended).
                final[key][ended] = np.stack([o[key] for o in infos["final_obs"][ended]])
        storage.add(obs, actions, rewards, terminated, truncated, None, final)
        obs = next_obs
    batch = storage.sample(64)
    achieved, goal = batch["next_observations"]["achieved_goal"], batch["observations"]["desired_goal"]
    expected = -np.any(achieved != goal, axis=-1).astype(np.float32)
    np.testing.assert_array_equal(batch["rewards"], expected)
    np.testing.assert_array_equal(
        batch["terminateds"][batch["relabelled"]], (expected == 0)[batch["relabelled"]]
    )
