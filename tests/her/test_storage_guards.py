"""HerStorage guards what it stores: one thread at a time, values its dtypes and spaces can hold,
finite as stored; and a pickle holds what is stored, not the whole capacity."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from gymnasium import spaces

from goalenvs.core import ConcurrentUseError
from her import HerStorage
from tests.her import encoded

KEYS = encoded.KEYS


def make(**kwargs) -> HerStorage:
    kwargs.setdefault("seed", 0)
    space = kwargs.pop("space", encoded.SPACE)
    action_space = kwargs.pop("action_space", encoded.ACTION_SPACE)
    return HerStorage(kwargs.pop("capacity", 1000), space, action_space, encoded.reward_fn, **kwargs)


def test_a_second_thread_is_refused_while_one_is_inside():
    # The reward function runs inside sample(): while it waits, the storage is in use by that thread.
    inside, release = threading.Event(), threading.Event()

    def slow_reward(achieved, desired, infos):
        inside.set()
        release.wait(10)
        return encoded.reward_fn(achieved, desired, infos)

    storage = make()
    for step in encoded.encoded_steps(1, 20, [[5]]):
        storage.add(*step)
    storage.set_functions(slow_reward)
    sampler = threading.Thread(target=storage.sample, args=(8,))
    sampler.start()
    try:
        assert inside.wait(10)
        step = next(encoded.encoded_steps(1, 1, [[5]], start=20))
        with pytest.raises(ConcurrentUseError, match=r"^HerStorage\.add called from a second thread"):
            storage.add(*step)
        with pytest.raises(ConcurrentUseError, match=r"^HerStorage\.sample called from a second thread"):
            storage.sample(8)
    finally:
        release.set()
        sampler.join()
    assert storage.num_transitions == 20  # the refused add stored nothing
    storage.add(*step)  # the storage is free again
    assert storage.num_transitions == 21


def test_two_threads_adding_lose_no_step_silently():
    # The hostile probe: two threads adding to one storage. Each add either stores its step or is
    # refused with ConcurrentUseError; the steps stored are exactly the adds that returned.
    storage = make(capacity=100_000, check_finite=False)
    steps = list(encoded.encoded_steps(1, 50, [[10]]))
    stored, refused = [0, 0], [0, 0]

    def adder(i: int) -> None:
        for k in range(2000):
            try:
                storage.add(*steps[k % 50])
                stored[i] += 1
            except ConcurrentUseError:
                refused[i] += 1

    threads = [threading.Thread(target=adder, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert storage.num_transitions == sum(stored)
    assert sum(stored) + sum(refused) == 4000
    # Consistent bookkeeping (the probe's corrupt storage listed 21 GB of episode lengths).
    lengths = storage.episode_lengths()
    assert lengths.sum() == storage.num_sampleable <= storage.num_transitions
    assert storage.current_episode_lengths[0] <= storage.num_transitions


def multibinary_space(n: int = 4) -> spaces.Dict:
    return spaces.Dict({key: spaces.MultiBinary(n) for key in KEYS})


def test_values_the_dtype_cannot_hold_are_refused():
    storage = make(space=multibinary_space(), action_space=spaces.Discrete(4))
    obs = {key: np.zeros((1, 4), np.int64) for key in KEYS}
    good = (obs, np.array([3]), np.zeros(1, np.float32), np.zeros(1, bool), np.zeros(1, bool), None, obs)
    storage.add(*good)
    bad = {**obs, "observation": np.array([[0, 300, 1, 0]], np.int64)}  # int8 would store 44
    with pytest.raises(ValueError, match=r"^observations\['observation'\] holds 300, which int8 cannot hold"):
        storage.add(bad, *good[1:])
    with pytest.raises(ValueError, match=r"^actions holds 999, outside the action space \(from 0 to 3\)$"):
        storage.add(obs, np.array([999]), *good[2:])
    with pytest.raises(ValueError, match=r"^actions holds -1, outside the action space"):
        storage.add(obs, np.array([-1]), *good[2:])
    assert storage.num_transitions == 1
    assert storage.rows("observations")["observation"].max() <= 1


@pytest.mark.parametrize(
    ("space", "action", "message"),
    [
        (spaces.Discrete(3, start=-1), [[2]], "from -1 to 1"),
        (spaces.MultiDiscrete([2, 5]), [[1, 5]], "from 0 to 4"),
        (spaces.MultiBinary(3), [[0, 2, 1]], "from 0 to 1"),
        (spaces.Box(-2, 2, (2,), np.int64), [[3, 0]], "from -2 to 2"),
    ],
)
def test_integer_actions_outside_the_space_are_refused(space, action, message):
    storage = make(action_space=space)
    obs = {key: np.zeros((1, 3)) for key in KEYS}
    with pytest.raises(ValueError, match=rf"outside the action space \({message}\)"):
        storage.add(obs, np.array(action), np.zeros(1), np.zeros(1, bool), np.zeros(1, bool), None, obs)


def test_values_infinite_as_stored_are_refused():
    # 1e300 is finite in float64 and inf in float32 (actions, rewards): the check is on the stored value.
    storage = make()
    obs, actions, rewards, terminated, truncated, infos, nxt = next(encoded.encoded_steps(1, 1, [[5]]))
    with pytest.raises(
        ValueError, match=r"^actions holds non-finite values \(NaN or inf\) for env\(s\) \[0\]"
    ):
        storage.add(obs, np.array([[1e300, 0.0]]), rewards, terminated, truncated, infos, nxt)
    with pytest.raises(
        ValueError, match=r"^rewards holds non-finite values \(NaN or inf\) for env\(s\) \[0\]"
    ):
        storage.add(obs, actions, np.array([1e300]), terminated, truncated, infos, nxt)
    assert storage.num_transitions == 0
    storage.add(
        obs, actions.astype(np.float64), rewards.astype(np.float64), terminated, truncated, infos, nxt
    )
    assert storage.num_transitions == 1


@pytest.mark.parametrize("n_envs", [1, 3])
def test_a_pickle_holds_what_is_stored_and_loads_to_the_full_capacity(n_envs):
    storage = make(capacity=1_000_000, n_envs=n_envs)
    for step in encoded.encoded_steps(n_envs, 400, [[50, 30], [7], [45]][:n_envs]):
        storage.add(*step)
    data = pickle.dumps(storage)
    stored = storage.num_transitions * (3 * 3 * 8 + 2 * 4 + 4 + 2 + 8)  # the rows written, 94 bytes each
    assert len(data) < stored + 100_000  # not the 94 MB of the whole capacity
    clone = pickle.loads(data)
    assert clone.steps_per_env == storage.steps_per_env and clone.nbytes == storage.nbytes
    # Bit-equal afterwards: the same samples (the generator's state travels too), and the same after
    # further adds that fill the ring beyond what was pickled.
    for name in ("observations", "next_observations", "actions", "episode_starts", "episode_lengths"):
        a, b = storage.rows(name), clone.rows(name)
        for key in a if isinstance(a, dict) else [None]:
            np.testing.assert_array_equal(a if key is None else a[key], b if key is None else b[key])
    for _ in range(2):
        x, y = storage.sample(512), clone.sample(512)
        for key in ("observations", "next_observations"):
            for sub in KEYS:
                np.testing.assert_array_equal(x[key][sub], y[key][sub])
        for key in ("actions", "rewards", "terminateds", "truncateds"):
            np.testing.assert_array_equal(x[key], y[key])
        for step in encoded.encoded_steps(n_envs, 100, [[50, 30], [7], [45]][:n_envs], start=400):
            storage.add(*step)
            clone.add(*step)
