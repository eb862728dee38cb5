"""HerStorage never loses good steps to a bad call, and says what is wrong where it happens.

* ``add`` refuses a malformed step (shape, dtype kind, batch size, keys, NaN/inf) before staging
  it: before, the step was staged as is and the next flush (at the latest the next ``sample``)
  raised *after* emptying the staged list, so every pending good step was lost with it;
* a storage larger than the available memory warns, and one that cannot be allocated says so in
  one line naming the capacity and the bytes;
* an episode longer than the storage is named as the reason nothing can be sampled;
* a storage, or a stable-baselines3 buffer, loaded for other spaces is refused when it is attached.
"""

from __future__ import annotations

import contextlib
import pickle
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest

import goalenvs
from goalenvs.core import available_memory
from her import HerStorage
from tests.her import encoded as legacy
from tests.her.test_her_storage import assert_same_storage

gym.register_envs(goalenvs)

# Encoded steps (observations [env, episode, step]) of episodes of 3, 4 and 4 steps: 100 adds hold
# 27 complete episodes (99 transitions per env) and one step of the 28th.
LENGTHS = [[3, 4, 4], [3, 4, 4]]


def make(n_envs: int = 1, **kwargs) -> HerStorage:
    kwargs.setdefault("seed", 0)
    return HerStorage(
        kwargs.pop("capacity", 1000),
        legacy.SPACE,
        legacy.ACTION_SPACE,
        legacy.reward_fn,
        n_envs=n_envs,
        **kwargs,
    )


def steps(n_envs: int, n_steps: int, start: int = 0) -> list[tuple]:
    return list(legacy.encoded_steps(n_envs, n_steps, LENGTHS[:n_envs], start=start))


def test_a_malformed_step_is_refused_and_keeps_every_staged_step():
    # The report: 100 good steps (27 finished episodes), then one
    # step with a wrong goal shape. The storage took it, and the next sample raised and lost all 100.
    storage = make()
    for step in steps(1, 100):
        storage.add(*step)
    obs, actions, rewards, terminated, truncated, infos, nxt = steps(1, 1, start=100)[0]
    obs["achieved_goal"] = np.zeros((1, 2))
    with pytest.raises(ValueError, match=r"observations\['achieved_goal'\] must have shape \(1, 3\)"):
        storage.add(obs, actions, rewards, terminated, truncated, infos, nxt)
    assert storage.num_sampleable == 99 and len(storage.episode_lengths()) == 27
    assert storage.num_transitions == 100
    assert storage.sample(64)["observations"]["observation"].shape == (64, 3)


def _set(container: dict, key: str, value):
    container[key] = value


# (id, change made to a good step of 2 envs, error, message)
BAD_STEPS = [
    (
        "goal shape",
        lambda s: _set(s["obs"], "achieved_goal", np.zeros((2, 2))),
        ValueError,
        r"^observations\['achieved_goal'\] must have shape \(2, 3\) \(n_envs=2, then the space's \(3,\)\), "
        r"got \(2, 2\)$",
    ),
    (
        "batch size",
        lambda s: _set(s["nxt"], "observation", np.zeros((3, 3))),
        ValueError,
        r"^next_observations\['observation'\] must have shape \(2, 3\) .*got \(3, 3\)$",
    ),
    (
        "flattened",
        lambda s: _set(s["obs"], "desired_goal", np.zeros(6)),
        ValueError,
        r"^observations\['desired_goal'\] must have shape \(2, 3\) .*got \(6,\)$",
    ),
    (
        "missing key",
        lambda s: s["obs"].pop("achieved_goal"),
        ValueError,
        r"^observations must have the keys \['achieved_goal', 'desired_goal', 'observation'\] of the "
        r"observation space: missing \['achieved_goal'\], unexpected \[\]$",
    ),
    (
        "extra key",
        lambda s: _set(s["nxt"], "velocity", np.zeros((2, 3))),
        ValueError,
        r"^next_observations must have the keys .* missing \[\], unexpected \['velocity'\]$",
    ),
    (
        "not a dict",
        lambda s: _set(s, "obs", np.zeros((2, 9))),
        TypeError,
        r"^observations must be a dict of arrays with the keys \[.*\], got ndarray$",
    ),
    (
        "observation dtype",
        lambda s: _set(s["obs"], "observation", np.full((2, 3), "a")),
        TypeError,
        r"^observations\['observation'\] must be float64 \(bool, integer, float values accepted\), "
        r"got dtype <U1$",
    ),
    (
        "action shape",
        lambda s: _set(s, "actions", np.zeros((2, 3), np.float32)),
        ValueError,
        r"^actions must have shape \(2, 2\) \(n_envs=2, then the space's \(2,\)\), got \(2, 3\)$",
    ),
    (
        "action dtype",
        lambda s: _set(s, "actions", np.zeros((2, 2), complex)),
        TypeError,
        r"^actions must be float32 \(bool, integer, float values accepted\), got dtype complex128$",
    ),
    (
        "rewards size",
        lambda s: _set(s, "rewards", np.zeros(3, np.float32)),
        ValueError,
        r"^rewards must have shape \(2,\) \(n_envs=2, then the space's \(\)\), got \(3,\)$",
    ),
    (
        "ragged rewards",
        lambda s: _set(s, "rewards", [[0.0], [0.0, 1.0]]),
        ValueError,
        r"^rewards must be an array of shape \(2,\), got a list numpy cannot read as one$",
    ),
    (
        "float flags",
        lambda s: _set(s, "terminated", np.zeros(2)),
        TypeError,
        r"^terminateds must be bool \(bool, integer values accepted\), got dtype float64$",
    ),
    (
        "flags size",
        lambda s: _set(s, "truncated", np.zeros(1, bool)),
        ValueError,
        r"^truncateds must have shape \(2,\) .*got \(1,\)$",
    ),
    (
        "NaN observation",
        lambda s: s["obs"]["observation"].__setitem__((1, 0), np.nan),
        ValueError,
        r"^observations\['observation'\] holds non-finite values \(NaN or inf\) for env\(s\) \[1\], which would "
        r"poison training; nothing of this step was stored \(HerStorage\(check_finite=False\) stores them\)$",
    ),
    (
        "inf reward",
        lambda s: s["rewards"].__setitem__(0, np.inf),
        ValueError,
        r"^rewards holds non-finite values \(NaN or inf\) for env\(s\) \[0\]",
    ),
    (
        "NaN action",
        lambda s: s["actions"].__setitem__((1, 1), np.nan),
        ValueError,
        r"^actions holds non-finite values \(NaN or inf\) for env\(s\) \[1\]",
    ),
    (
        "-inf final observation",
        lambda s: (
            s["nxt"]["desired_goal"].__setitem__((0, 2), -np.inf),
            s["terminated"].__setitem__(0, True),
        ),
        ValueError,
        r"^next_observations\['desired_goal'\] holds non-finite values \(NaN or inf\) for env\(s\) \[0\]",
    ),
]


@pytest.mark.parametrize(
    ("change", "error", "message"), [case[1:] for case in BAD_STEPS], ids=[c[0] for c in BAD_STEPS]
)
def test_a_bad_step_leaves_the_storage_as_if_never_called(change, error, message):
    storage, twin = make(2), make(2)  # same seed: the same samples from the same contents
    for step in steps(2, 100):
        storage.add(*step)
        twin.add(*step)
    obs, actions, rewards, terminated, truncated, infos, nxt = steps(2, 1, start=100)[0]
    bad = dict(obs=obs, actions=actions, rewards=rewards, terminated=terminated, truncated=truncated, nxt=nxt)
    change(bad)
    with pytest.raises(error, match=message):
        storage.add(
            bad["obs"], bad["actions"], bad["rewards"], bad["terminated"], bad["truncated"], infos, bad["nxt"]
        )
    assert storage.num_transitions == twin.num_transitions == 200
    assert_same_storage(storage, twin)  # positions, episodes, every stored row, and samples
    for step in steps(2, 60, start=100):  # further good steps: both go on alike
        storage.add(*step)
        twin.add(*step)
    assert_same_storage(storage, twin)


def test_bad_infos_are_refused_when_kept():
    storage, twin = make(2, copy_info_dict=True), make(2, copy_info_dict=True)
    for step in steps(2, 10):
        storage.add(*step)
        twin.add(*step)
    obs, actions, rewards, terminated, truncated, infos, nxt = steps(2, 1, start=10)[0]
    with pytest.raises(ValueError, match=r"^infos must have one entry per env \(2\), got 3$"):
        storage.add(obs, actions, rewards, terminated, truncated, [*infos, {}], nxt)
    with pytest.raises(
        TypeError, match=r"^infos must be None, a list of dicts or a dict of arrays, got int$"
    ):
        storage.add(obs, actions, rewards, terminated, truncated, 3, nxt)
    assert_same_storage(storage, twin)


def test_next_observations_are_checked_where_they_are_stored():
    # Within an episode the next observation is not stored (the next step's observation is, and
    # is checked then): a bad one there is no harm, until end_episodes() would make it the final one.
    storage = make()
    good = steps(1, 5)  # an episode of 3 steps, then one of 4 under way
    for step in good[:3]:
        storage.add(*step)
    obs, actions, rewards, terminated, truncated, infos, nxt = good[3]
    storage.add(
        obs, actions, rewards, terminated, truncated, infos, nxt | {"observation": np.full((1, 3), np.nan)}
    )
    with pytest.raises(ValueError) as error:
        storage.end_episodes()
    assert str(error.value) == (
        "cannot end the unfinished episode(s) of env(s) [0]: next_observations['observation'] given with their "
        "latest step holds non-finite values (NaN or inf), which would be their final observation; add a step "
        "with finite values first"
    )
    np.testing.assert_array_equal(storage.current_episode_lengths, [1])
    storage.add(*good[4])
    assert storage.end_episodes().tolist() == [0]
    assert storage.episode_lengths().tolist() == [3, 2]
    assert np.isfinite(storage.sample(200)["next_observations"]["observation"]).all()


def test_equivalent_forms_are_accepted_and_stored_alike():
    # Axes of length 1 added or left out, Python scalars and lists, integer observations in float
    # fields, float64 rewards, integer flags: the same values as the canonical arrays.
    canonical, lenient = make(), make()
    for k, (obs, actions, rewards, terminated, truncated, infos, nxt) in enumerate(steps(1, 40)):
        canonical.add(obs, actions, rewards, terminated, truncated, infos, nxt)
        lenient.add(
            {key: value[0].astype(np.int64) for key, value in obs.items()},  # (3,) integers
            actions[0].tolist(),
            float(rewards[0]) if k % 2 else rewards.astype(np.float64).reshape(1, 1),
            bool(terminated[0]),
            truncated.astype(np.uint8),
            infos,
            {key: value.reshape(1, 1, 3) for key, value in nxt.items()},
        )
    assert_same_storage(canonical, lenient)


def test_non_finite_values_are_stored_when_asked_and_huge_ones_always():
    storage = make(check_finite=False)
    obs, actions, rewards, terminated, truncated, infos, nxt = steps(1, 1)[0]
    obs["observation"][0, 0] = np.nan
    storage.add(obs, actions, rewards, terminated, truncated, infos, nxt)
    assert np.isnan(storage.rows("observations")["observation"][0, 0, 0])
    # 1e200 squared overflows the quick check's sum of squares; the exact check then accepts it.
    checked = make()
    obs, actions, rewards, terminated, truncated, infos, nxt = steps(1, 1)[0]
    obs["observation"][0, 0] = 1e200
    actions[0, 0] = 3e38  # float32: its square overflows too
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning from the check either
        for _ in range(2):  # the first add takes the careful path, the second the fast one
            checked.add(obs, actions, rewards, terminated, truncated, infos, nxt)
    assert checked.rows("observations")["observation"][1, 0, 0] == 1e200
    assert checked.rows("actions")[0, 0, 0] == np.float32(3e38)
    # Unpickled storages check too (the check is rebuilt, the option kept).
    clone = pickle.loads(pickle.dumps(storage))
    assert not clone.check_finite
    clone.add(
        obs | {"desired_goal": np.full((1, 3), np.nan)}, actions, rewards, terminated, truncated, infos, nxt
    )
    with pytest.raises(ValueError, match="non-finite"):
        pickle.loads(pickle.dumps(checked)).add(
            obs | {"desired_goal": np.full((1, 3), np.nan)},
            actions,
            rewards,
            terminated,
            truncated,
            infos,
            nxt,
        )


# ---------------------------------------------------------------------------------- memory
@pytest.mark.parametrize(
    ("n_envs", "capacity", "copy_info_dict"), [(1, 100, False), (3, 100, True), (16, 10_000, False)]
)
def test_planned_bytes_are_the_allocated_bytes(n_envs, capacity, copy_info_dict):
    # The size the memory check compares with the available memory is the size allocated.
    storage = make(n_envs, capacity=capacity, copy_info_dict=copy_info_dict)
    assert storage.planned_nbytes() == storage.nbytes
    small = HerStorage(
        capacity, {"achieved_goal": ((2,), np.int8), "desired_goal": ((2,), np.int8)}, ((), int), None
    )
    assert small.planned_nbytes() == small.nbytes


@pytest.mark.parametrize("capacity", [2**56, 2**62])
def test_a_storage_beyond_memory_warns_then_fails_in_one_line(capacity):
    # 2**56 rows of 94 bytes (6.8e18 bytes) exceed any machine's address space, so numpy refuses
    # to map them (MemoryError) without touching a page; 2**62 rows exceed 2**63 bytes, which
    # numpy refuses as a ValueError. Both come out as one MemoryError naming capacity and bytes.
    warns = pytest.warns(
        UserWarning,
        match=rf"^HerStorage\(capacity={capacity}\) \(stable-baselines3's buffer_size; {capacity} steps per env "
        r"x n_envs=1\) needs [\d,]+ bytes \([\d,.]+ GiB\), more than the [\d,]+ bytes \([\d,.]+ GiB\) of memory "
        r"available: it may exhaust memory as it fills; lower capacity$",
    )
    if available_memory() is None:  # no psutil and no /proc/meminfo: the check is skipped
        warns = contextlib.nullcontext()
    with warns, pytest.raises(MemoryError) as error:
        make(capacity=capacity)
    message = str(error.value)
    assert re.fullmatch(
        rf"HerStorage\(capacity={capacity}\) \(stable-baselines3's buffer_size; {capacity} steps per env x "
        r"n_envs=1\) needs ([\d,]+) bytes \([\d,.]+ GiB\), which could not be allocated; lower capacity",
        message,
    )
    needed = int(re.search(r"needs ([\d,]+) bytes", message).group(1).replace(",", ""))
    assert needed > capacity * 94  # rows of 94 bytes, plus the bookkeeping


def test_available_memory_is_read_on_linux():
    try:
        with open("/proc/meminfo") as f:
            total = int(next(line for line in f if line.startswith("MemTotal:")).split()[1]) * 1024
    except OSError:
        pytest.skip("no /proc/meminfo on this system")
    available = available_memory()
    assert available is not None and 0 < available <= total


# ---------------------------------------------------------------------------------- long episodes
def test_an_episode_longer_than_the_storage_is_the_reason_given():
    storage = make(capacity=20)
    # The add that makes the episode longer than the ring warns.
    with pytest.warns(
        UserWarning, match=r"^an episode of env\(s\) \[0\] has outgrown the 20 steps the storage keeps"
    ):
        for step in legacy.encoded_steps(1, 25, [[30]]):
            storage.add(*step)
    with pytest.raises(RuntimeError) as error:
        storage.sample(8)
    assert str(error.value) == (
        "Unable to sample: the longest episode of env 0 has reached 25 steps, more than the 20 steps the storage "
        "keeps per env (capacity // n_envs), so it can never be sampled; raise capacity (stable-baselines3's "
        "buffer_size) to at least 25 (n_envs=1 x the longest episode length), or end episodes sooner (a time limit)"
    )
    # It ends at 30 steps, still too long; a short episode after it can be sampled.
    for step in legacy.encoded_steps(1, 5 + 4, [[30, 4]], start=25):
        storage.add(*step)
    assert storage.episode_lengths().tolist() == [4]
    assert storage.sample(8)["observations"]["observation"][:, 1].tolist() == [1.0] * 8


def test_the_longest_outgrown_episode_of_all_envs_is_named():
    storage = make(2, capacity=40)  # 20 steps per env
    with pytest.warns(UserWarning, match="has outgrown the 20 steps"):
        for step in legacy.encoded_steps(2, 28, [[30], [25, 40]]):
            storage.add(*step)
        with pytest.raises(RuntimeError) as error:
            storage.sample(8)
    assert str(error.value).startswith(
        "Unable to sample: the longest episode of env 0 has reached 28 steps, more than the 20 steps"
    )
    assert "to at least 56 (n_envs=2 x the longest episode length)" in str(error.value)


def test_an_episode_as_long_as_the_storage_is_sampled():
    storage = make(capacity=20)
    for step in legacy.encoded_steps(1, 20, [[20]]):
        storage.add(*step)
    assert storage.episode_lengths().tolist() == [20]
    storage.sample(4)


# ---------------------------------------------------------------------------------- other spaces
def test_a_storage_loaded_for_other_spaces_is_refused():
    four = gym.make("goalenvs/BitFlip-v0", n_bits=4)
    six = gym.make("goalenvs/BitFlip-v0", n_bits=6)
    loaded = pickle.loads(pickle.dumps(HerStorage.from_env(four, 100)))
    loaded.check_spaces(four.observation_space, four.action_space, 1)
    with pytest.raises(ValueError) as error:
        loaded.check_spaces(six.observation_space, six.action_space)
    assert str(error.value) == (
        "this HerStorage holds steps of observation_space {'achieved_goal': (4,) int8, 'desired_goal': (4,) int8, "
        "'observation': (4,) int8} and action_space () int64, not of the observation_space {'achieved_goal': "
        "(6,) int8, 'desired_goal': (6,) int8, 'observation': (6,) int8} and action_space () int64 given; "
        "build a new storage for these spaces"
    )
    with pytest.raises(
        ValueError, match=r"^this HerStorage holds steps of n_envs=1 envs, not of the n_envs=4 given"
    ):
        loaded.check_spaces(four.observation_space, four.action_space, 4)


def test_a_storage_of_fetch_reach_is_refused_for_fetch_push():
    pytest.importorskip("mujoco", reason="the fetch extra (mujoco) is not installed")
    reach, push = gym.make("goalenvs/FetchReach-v0"), gym.make("goalenvs/FetchPush-v0")
    storage = HerStorage.from_env(reach, 100)
    with pytest.raises(ValueError, match=r"'observation': \(10,\) float64.*'observation': \(25,\) float64"):
        storage.check_spaces(push.observation_space, push.action_space)


class TestStableBaselines3Load:
    """``model.load_replay_buffer`` of a buffer saved for other spaces: refused by ``set_env``."""

    @pytest.fixture(autouse=True)
    def _sb3(self, one_torch_thread):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra (stable-baselines3) is not installed")

    @staticmethod
    def model(n_bits: int, n_envs: int = 1):
        from stable_baselines3 import DQN
        from stable_baselines3.common.env_util import make_vec_env

        from her import HerReplayBuffer

        env = make_vec_env("goalenvs:goalenvs/BitFlip-v0", n_envs=n_envs, env_kwargs=dict(n_bits=n_bits))
        return DQN(
            "MultiInputPolicy",
            env,
            replay_buffer_class=HerReplayBuffer,
            buffer_size=1000,
            learning_starts=10_000,  # collect only
            policy_kwargs=dict(net_arch=[8]),
            seed=0,
        )

    def test_other_spaces(self, tmp_path):
        saved = self.model(4)
        saved.learn(30)
        saved.save_replay_buffer(tmp_path / "buffer.pkl")
        other = self.model(6)
        with pytest.raises(ValueError) as error:
            other.load_replay_buffer(tmp_path / "buffer.pkl")
        assert str(error.value) == (
            "this HerReplayBuffer was saved for observation_space Dict('achieved_goal': MultiBinary(4), "
            "'desired_goal': MultiBinary(4), 'observation': MultiBinary(4)) and action_space Discrete(4), not for "
            "the env's Dict('achieved_goal': MultiBinary(6), 'desired_goal': MultiBinary(6), 'observation': "
            "MultiBinary(6)) and Discrete(6); load it into a model of the same env, or start a new buffer"
        )
        same = self.model(4)
        same.load_replay_buffer(tmp_path / "buffer.pkl")  # the same spaces still load
        assert same.replay_buffer.storage.num_transitions == saved.replay_buffer.storage.num_transitions > 0

    def test_other_number_of_envs(self, tmp_path):
        saved = self.model(4)
        saved.learn(20)
        saved.save_replay_buffer(tmp_path / "buffer.pkl")
        with pytest.raises(
            ValueError, match=r"^this HerReplayBuffer was saved for n_envs=1 envs, not for the env's 2;"
        ):
            self.model(4, n_envs=2).load_replay_buffer(tmp_path / "buffer.pkl")
