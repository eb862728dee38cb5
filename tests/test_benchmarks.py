"""The benchmarks' own arithmetic (what a row divides by must count what it says), the settings the
standalone comparisons copy from goalenvs.zoo, and their one-line errors."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from benchmarks.bench_ddpg_update import update_flop  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import her_ddpg  # noqa: E402


@pytest.mark.parametrize(("hidden", "layers", "batch"), [(256, 3, 64), (32, 2, 16)])
def test_update_flop_counts_every_pass_of_one_update(hidden: int, layers: int, batch: int) -> None:
    """Torch's count of one update's matrix products, against the passes counted by hand: the targets'
    forward (actor a, critic c), the critic's forward and twice-as-costly backward (3c), the actor's
    forward and backward (3a) through the critic's forward and its backward to its input (2c), less
    the two first layers' gradients by their input, which no update needs (the batch's inputs)."""
    obs_dim, goal_dim, act_dim = 25, 3, 4
    cfg = her_ddpg.Config(hidden=hidden, layers=layers, bf16=False)
    agent = her_ddpg.Agent(cfg, obs_dim, goal_dim, act_dim)
    rng = np.random.default_rng(0)

    def obs() -> dict[str, np.ndarray]:
        return {
            "observation": rng.standard_normal((batch, obs_dim)).astype(np.float32),
            "desired_goal": rng.standard_normal((batch, goal_dim)).astype(np.float32),
        }

    arrays = {
        "observations": obs(),
        "next_observations": obs(),
        "actions": rng.uniform(-1, 1, (batch, act_dim)).astype(np.float32),
        "rewards": -np.ones(batch, np.float32),
        "terminateds": np.zeros(batch, np.float32),
    }

    def macs(n_in: int, n_out: int) -> int:
        dims = [n_in] + [hidden] * layers + [n_out]
        return sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=False))

    actor, critic = macs(obs_dim + goal_dim, act_dim), macs(obs_dim + goal_dim + act_dim, 1)
    by_hand = 2 * batch * (4 * actor + 6 * critic)
    first_layers = 2 * batch * ((obs_dim + goal_dim) * hidden + (obs_dim + goal_dim + act_dim) * hidden)
    assert update_flop(agent, arrays) == by_hand - first_layers


def test_standalone_comparisons_use_the_settings_of_the_hyperparameter_files() -> None:
    """The DQN and TQC settings that benchmarks/compare_her_bitflip.py and profile_sb3_fetch.py copy
    are the entries of goalenvs.zoo.dqn and goalenvs.zoo.tqc_cpu that they name."""
    pytest.importorskip("sb3_contrib")
    import sb3_run  # examples/sb3_run.py, on the path above

    from benchmarks.compare_her_bitflip import DQN_SETTINGS
    from benchmarks.profile_sb3_fetch import ENV_ID, N_ENVS, TQC_SETTINGS
    from goalenvs.zoo import dqn as dqn_module
    from goalenvs.zoo import tqc_cpu

    dqn = sb3_run.evaluate_entry(dqn_module.hyperparams["goalenvs/BitFlip-v0"])
    schedule = dqn.pop("learning_rate")
    ours = dict(DQN_SETTINGS)
    ours_schedule = ours.pop("learning_rate")
    assert vars(ours_schedule) == vars(schedule)
    assert ours == {key: dqn[key] for key in ours}
    tqc = sb3_run.evaluate_entry(tqc_cpu.hyperparams[ENV_ID])
    assert TQC_SETTINGS == {key: tqc[key] for key in TQC_SETTINGS}
    assert (tqc["n_envs"], tqc["normalize"]) == (N_ENVS, {"norm_obs": True, "norm_reward": False})


MISTAKES = {
    "compare-jobs": (
        "compare_her_bitflip",
        ["--jobs", "0"],
        "--jobs",
        "'0' is not accepted: expected an integer >= 1",
    ),
    "compare-seeds": ("compare_her_bitflip", ["--seeds", "1", "-1"], "--seeds", "expected an integer >= 0"),
    "compare-bits": ("compare_her_bitflip", ["--n-bits", "ten"], "--n-bits", "expected an integer >= 1"),
    "profile-threads": ("profile_sb3_fetch", ["--threads", "0"], "--threads", "expected an integer >= 1"),
    "profile-steps": ("profile_sb3_fetch", ["--steps", "1.5"], "--steps", "expected an integer >= 1"),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_standalone_comparisons_reject_careless_input_in_one_line(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    module, argv, argument, fragment = MISTAKES[case]
    pytest.importorskip("sb3_contrib")  # stable-baselines3 and its contrib package: both modules import them
    main = importlib.import_module(f"benchmarks.{module}").main
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m benchmarks.{module}: error: argument {argument}: "), err
    assert err.count("\n") == 1 and fragment in err, err


def test_reader_paths_lists_the_modules_one_fetch_step_runs_through(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One FetchPush step runs the env's module and the physics wrapper, not the HER buffer; a sample
    through stable-baselines3 runs the storage and the env's goal function."""
    from benchmarks import reader_paths

    monkeypatch.chdir(Path.cwd())  # reader_paths works in the root it reads; back here afterwards
    monkeypatch.setattr(sys, "path", list(sys.path))
    reader_paths.main(["step"])
    step = capsys.readouterr().out
    reader_paths.main(["sample"])
    sample = capsys.readouterr().out
    assert "goalenvs/envs/fetch/env.py" in step and "goalenvs/envs/fetch/sim.py" in step
    assert "her/" not in step
    assert "her/storage.py" in sample and "her/sb3.py" in sample and "fetch/sim.py" not in sample
    assert step.splitlines()[-1].endswith("lines of function bodies")


@pytest.mark.parametrize(
    ("env_id", "sim_name", "reset_steps"),
    [
        ("goalenvs/HandManipulateBlockRotateZ-v0", "goalenvs.envs.hand.sim", 10),
        ("goalenvs/HandReach-v0", "goalenvs.envs.hand.sim", 0),
        ("goalenvs/FetchPush-v0", "goalenvs.envs.fetch.sim", 0),
    ],
)
def test_physics_bound_replays_the_physics_of_the_reset_and_the_steps(
    env_id: str, sim_name: str, reset_steps: int
) -> None:
    """The raw bound runs what the env ran: the reset's mj_step calls (the manipulate tasks' settling)
    from the state each started in, ending where the env's reset ended, then the episode's steps."""
    pytest.importorskip("mujoco")
    import gymnasium as gym

    import goalenvs  # noqa: F401
    from benchmarks.mujoco_speed import physics_bound, record_controls

    sim_module = importlib.import_module(sim_name)
    env = gym.make(env_id)
    actions = np.random.default_rng(0).uniform(-1.0, 1.0, (5, *env.action_space.shape))
    recorded = record_controls(env, actions, 3, sim_module)
    reset_calls, start_qpos = recorded[0], recorded[1]
    assert len(reset_calls) == reset_steps
    assert sim_module.mujoco.__name__ == "mujoco"  # the recorder is gone
    end_qpos = env.unwrapped.data.qpos.copy()
    base = env.unwrapped
    if reset_calls:  # the replayed reset ends in the env's start state
        physics_bound(env, (*recorded[:-3], *(a[:0] for a in recorded[-3:])), None)
        np.testing.assert_allclose(base.data.qpos, start_qpos, rtol=0, atol=1e-12)
    physics_bound(env, recorded, None)
    if "Hand" in env_id:  # (Fetch's contacts solve from another warm start: a replay drifts by ~1e-2)
        np.testing.assert_allclose(base.data.qpos, end_qpos, rtol=0, atol=1e-9)


def test_handreach_bound_finds_the_start_pose_and_no_pose_beyond_the_hands_reach() -> None:
    pytest.importorskip(
        "goalenvs.envs.hand", reason="the hand tasks need mujoco (pip install goalenvs[fetch])"
    )
    pytest.importorskip("scipy")
    import gymnasium as gym

    from benchmarks import handreach_bound

    env = gym.make("goalenvs/HandReach-v0").unwrapped
    hand = handreach_bound.Hand(env)
    rng = np.random.default_rng(0)
    start = env.initial_goal
    assert np.allclose(hand.tips(hand.start), start, atol=1e-9)
    assert hand.least_distance(start, rng) < 1e-4
    # A middle-finger goal (the first of the evaluation seeds): within reach, to the tenth of a millimetre.
    goals = (env.reset(seed=handreach_bound.SEEDS + i)[0]["desired_goal"] for i in range(50))
    goal = next(g for g in goals if handreach_bound.goal_kind(g) == "middle")
    assert hand.least_distance(goal, rng) < 1e-4
    # The thumb's tip 30 cm above where it starts: out of reach, by about that much.
    far = start.copy()
    far[12:15] += (0.0, 0.0, 0.3)
    assert hand.least_distance(far, rng) > 0.2
    with pytest.raises(SystemExit, match=r"KINDS: \['thumb'\] not accepted"):
        handreach_bound.main(1, ("thumb",))
    with pytest.raises(SystemExit, match="EPISODES: 0 not accepted"):
        handreach_bound.main(0)
    with pytest.raises(
        SystemExit, match=r"PENETRATION_MM: 25.0 not accepted; accepted: a number of mm in \[0, 20\)"
    ):
        handreach_bound.main(1, ("ring",), 25.0)
    # The contact pairs: apart at the start pose; the middle fingertip inside the thumb's where the search
    # without contacts meets that goal (so the contact-aware search has something to hold apart).
    pairs = list(zip(env.model.pair_geom1.tolist(), env.model.pair_geom2.tolist(), strict=True))
    assert min(hand.gap(hand.start, a, b) for a, b in pairs) > 1e-3
    hand.least_distance(goal, rng)
    assert min(hand.gap(hand.pose, a, b) for a, b in pairs) < -1e-3


@pytest.mark.slow
def test_handreach_bound_with_contacts_keeps_the_pairs_apart_and_finds_a_larger_distance() -> None:
    pytest.importorskip(
        "goalenvs.envs.hand", reason="the hand tasks need mujoco (pip install goalenvs[fetch])"
    )
    pytest.importorskip("scipy")
    import gymnasium as gym

    from benchmarks import handreach_bound

    env = gym.make("goalenvs/HandReach-v0").unwrapped
    goals = (env.reset(seed=handreach_bound.SEEDS + i)[0]["desired_goal"] for i in range(50))
    goal = next(g for g in goals if handreach_bound.goal_kind(g) == "middle")
    hand = handreach_bound.Hand(env, penetration=0.0035)
    distance = hand.least_distance(goal, np.random.default_rng(0))
    assert 1e-3 < distance < 0.01  # held apart, the tips stop short of the goal, still within 1 cm
    pairs = list(zip(env.model.pair_geom1.tolist(), env.model.pair_geom2.tolist(), strict=True))
    assert min(hand.gap(hand.pose, a, b) for a, b in pairs) >= -0.0035 - 1e-5
