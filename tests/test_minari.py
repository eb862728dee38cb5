"""Every goalenvs id records into a Minari dataset, and the dataset gives back its rewards and its env.

Minari writes an env's spec as JSON, which needs string entry points (issue 25). Datasets are written to
``tmp_path`` (``MINARI_DATASETS_PATH``); nothing is downloaded.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec

from goalenvs.registration import ENVS
from goalenvs.wrappers.checker import GoalContractChecker
from tests.conftest import make_params

minari = pytest.importorskip("minari")
pytest.importorskip("jax")  # minari's DataCollector needs it (the minari[create] extra)

ALL = make_params()
MAKERS = {entry.id: entry.maker for entry in ENVS}
STEPS = 12  # per episode at most: a few short episodes per id
EPISODES = 3


def _dataset_id(env_id: str, name: str = "random") -> str:
    return f"goalenvs/{env_id.split('/')[1].removesuffix('-v0').lower()}/{name}-v0"


def _checker_in(env: gym.Env) -> bool:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, GoalContractChecker):
            return True
        env = env.env
    return False


def _record(env_id: str, seed: int = 0, **make_kwargs):
    """``EPISODES`` random episodes of at most ``STEPS`` steps of ``env_id`` in a DataCollector; its dataset."""
    # No step_data_callback: every id's reset info has its step info's keys (issue 45).
    collector = minari.DataCollector(gym.make(env_id, **make_kwargs), record_infos=True)
    collector.action_space.seed(seed)
    for episode in range(EPISODES):
        collector.reset(seed=seed + episode)
        for _ in range(STEPS):
            if any(collector.step(collector.action_space.sample())[2:4]):
                break
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Minari asks for an author, a description, ...
        return collector.create_dataset(_dataset_id(env_id), algorithm_name="random")


@pytest.fixture(autouse=True)
def datasets_in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))


@pytest.mark.parametrize("env_id", ALL)
def test_recorded_rewards_are_compute_reward(env_id):
    _record(env_id)
    dataset = minari.load_dataset(_dataset_id(env_id))  # read back from disk
    assert dataset.total_episodes == EPISODES and dataset.env_spec.id == env_id
    goal_env = gym.make(env_id).unwrapped
    step_keys = None
    for episode in dataset.iterate_episodes():
        obs, infos, n = episode.observations, episode.infos, len(episode)
        assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
        assert all(len(value) == n + 1 for value in obs.values())  # the reset's observation, then each step's
        assert infos and all(len(value) == n + 1 for value in infos.values())
        assert "is_success" in infos
        step_keys = step_keys or set(infos)
        assert set(infos) == step_keys
        step_infos = {key: value[1:] for key, value in infos.items()}  # the infos that came with the rewards
        expected = goal_env.compute_reward(obs["achieved_goal"][1:], obs["desired_goal"][1:], step_infos)
        np.testing.assert_array_equal(episode.rewards, np.asarray(expected, dtype=episode.rewards.dtype))
        # ... and step by step, one info dict at a time, as the env computed them
        for t in range(n):
            info = {key: value[t + 1] for key, value in infos.items()}
            assert episode.rewards[t] == goal_env.compute_reward(
                obs["achieved_goal"][t + 1], obs["desired_goal"][t + 1], info
            )


@pytest.mark.parametrize("env_id", ALL)
def test_dataset_recovers_its_env(env_id):
    dataset = _record(env_id)
    spec = dataset.spec.env_spec
    assert spec.id == env_id and isinstance(spec.entry_point, str)
    for env in (dataset.recover_environment(), dataset.recover_environment(eval_env=True), gym.make(spec)):
        assert env.spec.id == env_id and _checker_in(env)
        assert env.observation_space == dataset.observation_space and env.action_space == dataset.action_space
        obs, _ = env.reset(seed=0)
        env.step(env.action_space.sample())
        assert dataset.observation_space.contains(obs)


def test_recorded_spec_keeps_env_kwargs_and_the_checker_switch():
    dataset = _record("goalenvs/BitFlip-v0", n_bits=5, check_goal_contract=False)
    assert dataset.spec.env_spec.kwargs == {"n_bits": 5, "check_goal_contract": False}
    env = dataset.recover_environment()
    assert env.unwrapped.task.n_bits == 5 and not _checker_in(env)
    assert env.observation_space["desired_goal"].shape == (5,)


@pytest.mark.parametrize("env_id", ALL)
def test_spec_json_round_trip(env_id):
    """Every id's spec (with kwargs given to gym.make) is JSON, and the env made from it is the same."""
    for kwargs, checked in (({}, True), ({"check_goal_contract": False}, False)):
        spec = gym.make(env_id, **kwargs).spec
        remade = gym.make(EnvSpec.from_json(spec.to_json()))
        assert remade.spec == spec and _checker_in(remade) == checked
        a, b = gym.make(spec).reset(seed=4)[0], remade.reset(seed=4)[0]
        assert all(np.array_equal(a[key], b[key]) for key in a)


def test_every_id_records_with_plain_data_collector():
    """The issue's own line: a DataCollector with its defaults (no infos recorded) on every id."""
    ids = [param.values[0] for param in ALL if not param.marks]  # ids whose dependencies are installed
    for env_id in ids:
        collector = minari.DataCollector(gym.make(env_id))
        collector.reset(seed=0)
        collector.step(collector.action_space.sample())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dataset = collector.create_dataset(_dataset_id(env_id, "plain"))
        assert dataset.total_steps == 1 and dataset.env_spec.entry_point == MAKERS[env_id]


@pytest.mark.parametrize("env_id", ALL)
def test_plain_collector_with_infos_and_autoseeds_records_every_id(env_id, monkeypatch):
    """Issue 45: ``DataCollector(env, record_infos=True)`` with no callback, reset without a seed.

    Minari then seeds each reset with ``secrets.randbits(64)``: half such seeds are >= 2**63 (which
    raised OverflowError), so here they all are; and it keeps the reset's info layout for the episode
    (Fetch's reset info lacked the step's keys: ``pytree structure error``).
    """
    import secrets

    drawn = iter([2**64 - 1, 2**63, 2**63 + 12345])
    monkeypatch.setattr(secrets, "randbits", lambda bits: next(drawn))
    collector = minari.DataCollector(gym.make(env_id), record_infos=True)
    collector.action_space.seed(0)
    for _ in range(2):
        collector.reset()
        for _ in range(4):
            if any(collector.step(collector.action_space.sample())[2:4]):
                break
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dataset = collector.create_dataset(_dataset_id(env_id, "autoseeded"), algorithm_name="random")
    assert dataset.total_episodes == 2
    for episode in dataset.iterate_episodes():
        assert episode.infos["is_success"].shape[0] == len(episode) + 1  # the reset's info, then each step's
    collector.close()
    minari.delete_dataset(_dataset_id(env_id, "autoseeded"))
