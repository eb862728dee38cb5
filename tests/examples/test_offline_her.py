"""The offline example: a Minari dataset into HerStorage with 'future' relabelling, TD3+BC on it, its commands."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("minari")
pytest.importorskip("jax")  # minari's DataCollector needs it (the minari[create] extra)
pytest.importorskip("h5py")  # minari's default storage

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import offline_her  # noqa: E402

ENV_ID = "goalenvs/FetchReach-v0"


@pytest.fixture(autouse=True)
def datasets_in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))


def _scripted(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Move the gripper toward the goal (a policy that succeeds often, so relabelling has work to do)."""
    step = np.clip(10.0 * (obs["desired_goal"] - obs["achieved_goal"]), -1.0, 1.0)
    return np.append(step, 0.0).astype(np.float32)


def _tiny_dataset(dataset_id: str = "goalenvs/fetchreach/tiny-v0", episodes: int = 4):
    """``episodes`` 10-step FetchReach episodes, scripted and random alternately, recorded with Minari."""
    env = offline_her.collector(gym.make(ENV_ID, max_steps=10))
    env.action_space.seed(0)
    for i in range(episodes):
        policy = _scripted if i % 2 == 0 else (lambda obs: env.action_space.sample())
        offline_her.run_episodes(env, policy, [i])
    with pytest.warns(UserWarning):  # Minari asks for an author, a description, ...
        env.create_dataset(dataset_id)
    return offline_her.load_dataset(dataset_id)


def test_dataset_relabels_into_her_storage_and_trains(one_torch_thread):
    dataset = _tiny_dataset()
    env = dataset.recover_environment()
    goal_env = env.unwrapped
    storage = offline_her.fill_storage(dataset, goal_env.compute_reward, n_sampled_goal=4, seed=0)
    assert storage.num_transitions == dataset.total_steps == 40
    assert list(storage.episode_lengths()) == [10] * 4
    assert storage.rows("infos").shape == (40, 1)  # the step infos, kept for compute_reward
    # the stored rewards are the recorded ones: compute_reward of (next achieved, desired)
    stored_achieved = np.concatenate(
        [ep.observations["achieved_goal"][1:] for ep in dataset.iterate_episodes()]
    )

    batch = storage.sample_arrays(64)
    obs, nxt = batch["observations"], batch["next_observations"]
    assert obs["observation"].shape == (64, 10) and obs["desired_goal"].shape == (64, 3)
    assert batch["actions"].shape == (64, 4) and batch["rewards"].shape == (64,)
    relabelled = batch["relabelled"]
    assert relabelled.sum() == int(0.8 * 64) and relabelled[-int(0.8 * 64) :].all()
    np.testing.assert_array_equal(nxt["desired_goal"], obs["desired_goal"])  # the new goal on both sides
    expected = goal_env.compute_reward(nxt["achieved_goal"], obs["desired_goal"], None)
    np.testing.assert_array_equal(batch["rewards"], expected.astype(np.float32))
    # 'future' goals are achieved goals of the dataset (of the same episode, at or after the step)
    for goal in obs["desired_goal"][relabelled]:
        assert (np.abs(stored_achieved - goal).max(axis=1) == 0).any()
    assert (batch["rewards"][relabelled] == 0.0).any() and (batch["rewards"] == -1.0).any()

    s = offline_her.Settings(hidden=16, batch_size=32, updates=2)
    o_norm, g_norm = offline_her.fit_normalizers(storage, s)
    agent = offline_her.TD3BC(s, o_norm, g_norm, dataset.action_space, (-1.0, 0.0))
    before = [p.clone() for p in agent.actor.parameters()]
    losses = [agent.update(storage.sample_arrays(s.batch_size)) for _ in range(2)]
    assert set(losses[1]) == {"critic_loss", "actor_loss", "bc_loss"}  # the actor moves every 2nd update
    assert all(np.isfinite(v) for row in losses for v in row.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters(), strict=True))
    actions = agent.pi(obs["observation"][:5], obs["desired_goal"][:5])
    assert actions.shape == (5, 4) and np.all(np.abs(actions) <= 1.0)
    assert 0.0 <= offline_her.evaluate(agent, env, 2) <= 1.0


def test_a_pointmaze_dataset_loads_as_d4rl_ones_do():
    """Gymnasium-Robotics' PointMaze, in the layout of the D4RL PointMaze datasets (recorded here: no download)."""
    gymnasium_robotics = pytest.importorskip("gymnasium_robotics")
    gym.register_envs(gymnasium_robotics)
    env = offline_her.collector(gym.make("PointMaze_UMaze-v3", max_episode_steps=20))
    env.action_space.seed(0)
    offline_her.run_episodes(env, lambda obs: env.action_space.sample(), range(3))
    with pytest.warns(UserWarning):
        env.create_dataset("pointmaze/umaze/tiny-v0")
    dataset = offline_her.load_dataset("pointmaze/umaze/tiny-v0")
    compute_reward = dataset.recover_environment().unwrapped.compute_reward
    storage = offline_her.fill_storage(dataset, compute_reward, seed=0)
    assert storage.num_transitions == 60
    batch = storage.sample_arrays(50)
    expected = compute_reward(
        batch["next_observations"]["achieved_goal"], batch["observations"]["desired_goal"], None
    )
    np.testing.assert_array_equal(batch["rewards"], expected)
    assert (batch["rewards"][batch["relabelled"]] == 1.0).any()  # PointMaze's sparse reward: 1 at the goal


def test_a_dataset_records_in_a_process_that_imported_rl_zoo3(tmp_path):
    """Importing rl_zoo3 swaps Gymnasium's TimeLimit for one that adds ``info["TimeLimit.truncated"]`` at
    time-limit steps only; Minari then refused the episode (pytree structure error). In a subprocess, as
    the swap lasts for the whole process."""
    pytest.importorskip("gymnasium_robotics")
    if importlib.util.find_spec("rl_zoo3") is None:
        pytest.skip("rl_zoo3 is not installed")
    script = (
        "import sys; sys.path.insert(0, 'examples')\n"
        "import rl_zoo3, gymnasium as gym, gymnasium_robotics, offline_her\n"
        "gym.register_envs(gymnasium_robotics)\n"
        "env = offline_her.collector(gym.make('PointMaze_UMaze-v3', max_episode_steps=20))\n"
        "env.action_space.seed(0)\n"
        "offline_her.run_episodes(env, lambda obs: env.action_space.sample(), range(2))\n"
        "print(env.create_dataset('pointmaze/umaze/zoo-v0').total_steps)\n"
    )
    env = dict(os.environ, MINARI_DATASETS_PATH=str(tmp_path / "datasets"), PYTHONWARNINGS="ignore")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "40"


def test_goal_dataset_check_refuses_others():
    class Fake:
        observation_space = gym.spaces.Box(-1.0, 1.0, (3,))
        action_space = gym.spaces.Box(-1.0, 1.0, (2,))

        spec = SimpleNamespace(dataset_id="cartpole/random-v0")

    with pytest.raises(offline_her.RunError, match="not goal-conditioned"):
        offline_her.check_goal_dataset(Fake())
    Fake.observation_space = gym.make(ENV_ID).observation_space
    Fake.action_space = gym.spaces.Discrete(3)
    with pytest.raises(offline_her.RunError, match="accepted: a bounded Box"):
        offline_her.check_goal_dataset(Fake())


def test_record_and_train_commands(tmp_path, capsys, one_torch_thread):
    import her_ddpg

    run = tmp_path / "ddpg"
    tiny = ["--env", ENV_ID, "--n-envs", "2", "--n-cycles", "2", "--n-batches", "2", "--batch-size", "32",
            "--hidden", "16", "--layers", "1", "--buffer-size", "2000", "--eval-episodes", "2", "--epochs", "1",
            "--no-gif", "--output", str(run)]  # fmt: skip
    her_ddpg.main(tiny)
    datasets = tmp_path / "elsewhere"
    record = ["--datasets-path", str(datasets), "record", "--policy", str(run), "--dataset",
              "goalenvs/fetchreach/t-v0", "--expert-episodes", "1", "--noisy-episodes", "1"]  # fmt: skip
    offline_her.main(record)
    assert "2 episodes, 100 steps" in capsys.readouterr().out
    assert (datasets / "goalenvs/fetchreach/t-v0/data").is_dir()

    out = tmp_path / "offline"
    train = ["--datasets-path", str(datasets), "train", "--dataset", "goalenvs/fetchreach/t-v0", "--output",
             str(out), "--updates", "4", "--eval-freq", "2", "--eval-episodes", "1", "--hidden", "8",
             "--batch-size", "16"]  # fmt: skip
    success = offline_her.main(train)
    assert 0.0 <= success <= 1.0
    assert {p.name for p in out.iterdir()} >= {"config.json", "commands.txt", "eval.csv", "policy.pt"}
    assert (out / "eval.csv").read_text().count("\n") == 3  # header, updates 2 and 4
    state = torch.load(out / "policy.pt", weights_only=False)
    assert set(state) == {"actor", "normalizers", "low", "high", "settings"}

    def refused(argv: list[str], match: str) -> None:
        with pytest.raises(SystemExit) as exit_info:
            offline_her.main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("offline_her.py: error: ") and err.count("\n") == 1 and match in err, err

    refused(record, "Minari does not overwrite it")
    refused(train, "is not empty")
    offline_her.main([*train, "--force"])  # replaces the run's own files
    refused([*train[:4], "goalenvs/fetchreach/none-v0", *train[5:], "--force"], "no dataset")
    refused([*train[:4], "no version", *train[5:], "--force"], "is not a Minari dataset id")
    refused([*train, "--force", "--gamma", "1.0"], "--gamma: 1.0 is not accepted")
    other = [*record[:6], "goalenvs/fetchreach/other-v0", *record[7:]]
    refused([*other[:4], str(tmp_path), *other[5:]], "is not a run folder of her_ddpg.py")
    refused([*record, "--random-eps", "2"], "--random-eps: 2.0 is not accepted")
    refused(["train"], "the following arguments are required")


def _train_argv(dataset_id: str, out: Path) -> list[str]:
    return ["train", "--dataset", dataset_id, "--output", str(out), "--updates", "2", "--eval-freq", "2",
            "--eval-episodes", "1", "--hidden", "8", "--batch-size", "16"]  # fmt: skip


def _refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        offline_her.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("offline_her.py: error: ") and err.count("\n") == 1, err
    return err


def test_a_used_output_folder_is_refused_naming_only_options_train_has(tmp_path, capsys, one_torch_thread):
    _tiny_dataset(episodes=2)
    out = tmp_path / "offline"
    offline_her.main(_train_argv("goalenvs/fetchreach/tiny-v0", out))
    err = _refused(capsys, _train_argv("goalenvs/fetchreach/tiny-v0", out))
    assert f"{out} is not empty" in err and "--force" in err
    assert "--resume" not in err  # train has no --resume: a stopped run starts over
    with pytest.raises(SystemExit):
        offline_her.build_parser().parse_args(["train", "--resume", str(out)])


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("main_data.hdf5", "truncated"),
        ("main_data.hdf5", "random bytes"),
        ("main_data.hdf5", "zeroed tail"),
        ("metadata.json", "truncated"),
        ("metadata.json", "random bytes"),
    ],
)
def test_a_damaged_dataset_is_one_line_naming_it(tmp_path, capsys, name, damage):
    import shutil

    from minari.storage import get_dataset_path

    _tiny_dataset(episodes=2)
    broken = "goalenvs/fetchreach/broken-v0"
    shutil.copytree(get_dataset_path("goalenvs/fetchreach/tiny-v0"), get_dataset_path(broken))
    path = get_dataset_path(broken) / "data" / name
    data = path.read_bytes()
    half = len(data) // 2
    changed = {"truncated": data[:half], "random bytes": np.random.default_rng(0).bytes(len(data)),
               "zeroed tail": data[:half] + bytes(len(data) - half)}[damage]  # fmt: skip
    path.write_bytes(changed)
    out = tmp_path / "offline"
    err = _refused(capsys, _train_argv(broken, out))
    assert f"--dataset: {broken}" in err and "cannot be read" in err, err
    assert not out.exists()  # refused before the run folder is made
