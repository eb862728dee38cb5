"""check_goal_env: a correct env passes, each deliberately broken env fails the check for its breach,
third-party goal envs get the verdict they deserve, and every goalenvs env passes."""

from __future__ import annotations

import functools
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FlattenObservation

import goalenvs
import goalenvs.core
from goalenvs import CheckReport, GoalEnvError, check_goal_env
from goalenvs.check import CHECKS
from goalenvs.check.context import Context
from goalenvs.check.limits import TimeLimitExceeded, deadline
from tests.check import checker_envs as ce
from tests.conftest import make_params

SINGLE_ENV_CHECKS = {c.name for c in CHECKS if c.applies_to(vector=False)}
VECTOR_ENV_CHECKS = {c.name for c in CHECKS if c.applies_to(vector=True)}
SEVERITY = {c.name: c.severity for c in CHECKS}
RANK = {"pass": 0, "warn": 1, "fail": 2}


def reach(env_cls: type[gym.Env]) -> Callable[[], gym.Env]:
    return functools.partial(ce.make_reach, env_cls)


def not_pass(report: CheckReport) -> dict[str, str]:
    return {r.name: r.status for r in report.results if r.status != "pass"}


@pytest.mark.parametrize("terminate_on_success", [False, True])
def test_correct_env_passes_every_check(terminate_on_success: bool) -> None:
    report = check_goal_env(ce.make_reach(terminate_on_success=terminate_on_success))
    assert {r.name for r in report.results} == SINGLE_ENV_CHECKS
    assert not_pass(report) == {}
    assert report.passed and report.skipped == []
    report.raise_if_failed()  # does nothing


def test_goal_recomputed_through_a_rotation_passes_with_a_note() -> None:
    # Rounding (~1e-17) is no goal change: every reward is right and HER is unaffected.
    report = check_goal_env(ce.make_reach(ce.RotatedGoalEnv))
    assert not_pass(report) == {}
    message = report.result("desired_goal_fixed").message
    assert message.startswith("desired_goal stayed fixed within each of the")
    assert "Note: it moved by at most" in message and "float rounding" in message


def test_goals_that_rounding_moves_across_the_threshold_pass_goal_dtypes() -> None:
    # The arm rests at the threshold: float32 copies flip some sparse rewards, and the function is right.
    env = ce.make_reach(ce.OnThresholdEnv)
    ctx = Context(ce.make_reach(ce.OnThresholdEnv), n_steps=200, seed=0)
    ctx.record()
    probe, fn = ctx.probe(), ctx.fn("compute_reward")
    flipped = fn(probe["ag"], probe["mixed"], None) != fn(
        probe["ag"].astype(np.float32), probe["mixed"].astype(np.float32), None
    )
    assert flipped.any()  # the case is exercised
    report = check_goal_env(env)
    assert report.result("goal_dtypes").status == "pass", report.result("goal_dtypes").message
    assert not_pass(report) == {"reset_goals": "warn"}  # about half the resets are at the goal


def test_info_batch_read_with_info_values_passes() -> None:
    assert not_pass(check_goal_env(ce.make_reach(ce.BatchedInfoEnv))) == {}


# (case id, env factory, the check that must catch it, its status, a phrase of its message,
#  other non-passing checks the same breach also trips)
BROKEN: list[tuple[str, Callable[[], gym.Env], str, str, str, dict[str, str]]] = [
    ("flat Box observation", reach(ce.NotDictEnv), "observation_space", "fail", "got Box", {}),
    (
        "goal spaces differ", reach(ce.GoalShapeMismatchEnv), "observation_space", "fail",
        "achieved_goal and desired_goal spaces differ (shape (3,) vs (2,)", {},
    ),
    (
        "float64 goals in a float32 space", reach(ce.Float32SpaceEnv), "observations_in_space",
        "fail", "'achieved_goal' = ", {},
    ),
    (
        "step adds an action penalty", reach(ce.ActionPenaltyEnv), "reward_contract", "fail",
        "step adds a term compute_reward lacks", {},
    ),
    (
        "reward from the achieved goal before the step", reach(ce.RewardBeforeMoveEnv),
        "reward_contract", "fail", "achieved goal *before* the step", {},
    ),
    (
        "norm without axis=-1", reach(ce.NotVectorizedEnv), "compute_reward_vectorized", "fail",
        "on a batch of 2 (goals of shape (2, 3), infos as a list of 2 dicts) returns shape () "
        "instead of (2,)",
        {},
    ),
    (
        "info read as one dict", reach(ce.InfoNotBatchedEnv), "compute_reward_vectorized", "fail",
        "raised TypeError: list indices must be integers or slices, not str on a batch of 1",
        {"empty_infos": "warn"},
    ),
    (
        "info key needed, no default", reach(ce.InfoKeyRequiredEnv), "empty_infos", "warn",
        "compute_reward and compute_terminated raised on a list of empty dicts, what stable-baselines3's "
        "HerReplayBuffer passes unless copy_info_dict=True: compute_reward raised KeyError: \"an info in "
        "the batch has no 'crashed' entry\". They need the info key(s) ['crashed']. So training with that "
        "buffer stops at its first sample",
        {"reward_info_keys": "warn"},
    ),
    (
        "declared info keys miss one it reads", reach(ce.InfoKeyUnderdeclaredEnv), "reward_info_keys", "fail",
        "InfoKeyUnderdeclaredEnv.reward_info_keys declares ['is_success'], but compute_reward also reads "
        "['crashed']. A buffer that stores only the declared keys (her.HerReplayBuffer, her.HerStorage) "
        "relabels with those terms lost. Fix: declare every info key compute_reward reads: "
        "reward_info_keys = ('crashed', 'is_success')",
        {"empty_infos": "warn"},
    ),
    (
        "declared info key in no info", reach(ce.InfoKeyNotInInfoEnv), "reward_info_keys", "fail",
        "InfoKeyNotInInfoEnv.reward_info_keys declares ['crashed'], but no info of the rollout's steps has it",
        {},
    ),
    (
        "compute_reward draws from self.np_random", reach(ce.RngInRewardEnv), "compute_reward_pure",
        "fail", "changed the env's transitions", {},
    ),
    (
        "compute_reward keeps a call counter", reach(ce.AnnealingRewardEnv), "compute_reward_pure",
        "fail", "its answers depend on earlier calls",
        {"compute_reward_vectorized": "fail", "rollout_determinism": "warn"},
    ),
    (
        "compute_reward subtracts in place", reach(ce.InPlaceRewardEnv), "compute_reward_pure",
        "fail", "writes into its achieved_goal/desired_goal arguments", {"reward_contract": "fail"},
    ),
    (
        "compute_reward reads self.goal", reach(ce.SelfGoalRewardEnv), "reward_depends_on_goals",
        "fail", "the same rewards whatever desired_goal it is passed", {"reward_contract": "fail"},
    ),
    (
        "reward is the distance", reach(ce.DistanceRewardEnv), "best_reward_at_goal", "warn",
        "compute_reward(g, g) = 0 is lower than", {},
    ),
    (
        "goal redrawn mid-episode", reach(ce.MovingGoalEnv), "desired_goal_fixed", "fail",
        "desired_goal changed within an episode at its step 10", {},
    ),
    (
        "goal drifts by 1e-3 a step", reach(ce.DriftingGoalEnv), "desired_goal_fixed", "fail",
        "desired_goal changed within an episode at its step 1", {},
    ),
    (
        "compute_reward cancels in float32", reach(ce.WorldFrameRewardEnv), "goal_dtypes", "fail",
        "compute_reward on float32 copies of the goals disagrees with the goals as the env emits them "
        "(float64) at",
        {},
    ),
    (
        "compute_reward views the goals' bytes", reach(ce.ByteViewRewardEnv), "goal_dtypes", "fail",
        "compute_reward raised ValueError",
        {},
    ),
    (
        "compute_reward reads the step's is_success", reach(ce.SuccessBonusRewardEnv),
        "reward_reads_goal_info", "fail",
        "compute_reward reads info['is_success'], which step computed for the original desired goal", {},
    ),
    (
        "no is_success", reach(ce.NoSuccessInfoEnv), "is_success", "warn",
        "no step info has 'is_success' (it has ['success']: rename it)", {},
    ),
    (
        "reset draws from global np.random", reach(ce.GlobalRandomEnv), "reset_seeding", "fail",
        "reset(seed=0) gave different observations on two calls",
        {"compute_reward_pure": "warn", "rollout_determinism": "warn"},
    ),
    (
        "holds a lambda", reach(ce.UnpicklableEnv), "pickle", "warn",
        "pickle.loads(pickle.dumps(env)) raised", {},
    ),
    (
        "deepcopy shares state", reach(ce.SharedStateCopyEnv), "deepcopy", "warn",
        "after copy.deepcopy(env), the copy and the original disagree", {},
    ),
    (
        "copies share a simulator client", reach(ce.SharedClientEnv), "deepcopy", "warn",
        "after copy.deepcopy(env), the copy and the original disagree", {"pickle": "warn"},
    ),
    (
        "compute_reward returns a bool flag, step -1.0", reach(ce.BoolRewardEnv), "reward_contract", "fail",
        "step gave -1, compute_reward gives True. compute_reward returns booleans", {"best_reward_at_goal": "warn"},
    ),
    (
        "compute_reward cannot take info=None", reach(ce.InfoNoneEnv), "empty_infos", "warn",
        "compute_reward raised TypeError: 'NoneType' object is not iterable on info=None", {},
    ),
    (
        "compute_reward cannot take one dict of arrays", reach(ce.InfoListOnlyEnv), "empty_infos", "warn",
        "on one dict of arrays for the batch (OpenAI baselines' layout)", {},
    ),
    (
        "compute_reward records reached goals in the env", reach(ce.TasksDoneRewardEnv), "compute_reward_pure",
        "fail", "with reached goals, changed the env's transitions", {},
    ),
    (
        "info holds the env's live list", reach(ce.AliasedInfoEnv), "observations_not_aliased", "warn",
        "info['path'] returned after 1 step(s) changed later", {},
    ),
    (
        "no time limit", lambda: ce.ReachEnv(), "episode_ends", "warn",
        "no episode ended within the rollout's 200 steps and the env has no TimeLimit", {},
    ),
    (
        "one-step episodes", reach(ce.OneStepEpisodesEnv), "episode_ends", "warn",
        "all 200 episodes of the rollout last one step", {},
    ),
    (
        "time limit as terminated", reach(ce.TimeoutAsTerminatedEnv), "episode_ends", "warn",
        "episodes ended with terminated=True at the same length (20 steps) without reaching their goal",
        {"compute_terminated": "fail"},
    ),
    (
        "resets on the goal", reach(ce.StartsAtGoalEnv), "reset_goals", "warn",
        "resets start with the desired goal already reached", {},
    ),
    (
        "goal - position in the observation", reach(ce.GoalInObservationEnv), "goal_not_in_observation",
        "fail", "observation entries [22, 23, 24] are linear functions of the desired goal", {},
    ),
    (
        "is_success with another threshold", reach(ce.SuccessThresholdMismatchEnv), "success_matches_reward",
        "warn", "info['is_success'] and the reward disagree at", {},
    ),
    (
        "desired goal named goal", reach(ce.GoalNamedEnv), "compute_reward_defined", "warn",
        "compute_reward's parameters are named (achieved_goal, goal, info)", {},
    ),
    (
        "reward of shape (B, 1)", reach(ce.ColumnRewardEnv), "compute_reward_vectorized", "fail",
        "returns shape (1, 1) instead of (1,)", {},
    ),
    (
        "NaN state", reach(ce.NaNObservationEnv), "observations_in_space", "fail",
        "observation[3] = nan is outside its bounds [-inf, inf]", {},
    ),
    (
        "reset shows the previous goal", reach(ce.StaleGoalAtResetEnv), "desired_goal_fixed", "fail",
        "desired_goal changed within an episode at its step 1",
        {"reset_seeding": "fail", "rollout_determinism": "warn", "compute_reward_pure": "warn"},
    ),
    (
        "reward scaled by a wrapper", lambda: gym.wrappers.TransformReward(ce.make_reach(), lambda r: 10 * r),
        "reward_contract", "fail", "The env is wrapped by TransformReward above ReachEnv", {"pickle": "warn"},
    ),
    (
        "goals stacked by a wrapper", lambda: gym.wrappers.FrameStackObservation(ce.make_reach(), 2),
        "wrapper_keeps_goals", "fail", "wrapper FrameStackObservation changes the observation space",
        {n: "fail" for n in ("reward_contract", "compute_reward_vectorized", "compute_terminated", "compute_truncated")},
    ),
    (
        "same-step reset declared NextStep", lambda: ce.SameStepResetVectorEnv(), "desired_goal_fixed", "fail",
        "the vector env resets sub-envs in the same step, but its metadata['autoreset_mode'] says NextStep",
        {"is_success": "warn", "reward_contract": "fail", "vector_batch_reward": "fail"},
    ),
    (
        "ends on success without compute_terminated", reach(ce.TerminatesWithoutComputeTerminatedEnv),
        "compute_terminated", "fail", "but the env defines no compute_terminated", {},
    ),
    (
        "one entry out of its bounds", reach(ce.OneEntryOutOfBoundsEnv), "observations_in_space", "fail",
        "observation[7] = 2 is outside its bounds [-1, 1] (1 of 25 entries of 'observation' are out of "
        "bounds)",
        {},
    ),
    (
        "goals are dicts of arrays", reach(ce.DictGoalEnv), "observation_space", "fail",
        "achieved_goal and desired_goal are Dict spaces; HER stores and relabels each goal as one array",
        {},
    ),
    (
        "returns a view of its state", reach(ce.AliasedObsEnv), "observations_not_aliased", "fail",
        "changed later: 'achieved_goal'", {},
    ),
    (
        "step terminates, compute_terminated does not", reach(ce.TerminationMismatchEnv),
        "compute_terminated", "fail", "step returned terminated=True but compute_terminated gives False", {},
    ),
    (
        "compute_terminated collapses the batch", reach(ce.ScalarTerminatedEnv),
        "compute_terminated", "fail", "returns shape () instead of (2,)", {},
    ),
    (
        "no compute_reward", reach(ce.NoComputeRewardEnv), "compute_reward_defined", "fail",
        "defines compute_reward(achieved_goal, desired_goal, info)", {},
    ),
    (
        "achieved goals outside the desired_goal space", reach(ce.WideAchievedGoalEnv),
        "achieved_goal_in_desired_space", "warn", "lies outside the desired_goal space", {},
    ),
    (
        "FlattenObservation over a goal env", lambda: FlattenObservation(ce.make_reach()),
        "wrapper_keeps_goals",
        "fail", "wrapper FlattenObservation changes the observation space above ReachEnv",
        {"observation_space": "fail"},
    ),
    (
        "wrapper rescales goals and their space", lambda: ce.ScaleGoalsWrapper(ce.make_reach()),
        "wrapper_keeps_goals", "fail",
        "wrapper ScaleGoalsWrapper changes the observation space above ReachEnv",
        {"reward_contract": "fail"},
    ),
    (
        "wrapper rescales goals, keeps the space",
        lambda: ce.ScaleGoalsWrapper(ce.make_reach(), keep_space=True),
        "wrapper_keeps_goals", "fail", "wrapper ScaleGoalsWrapper changes achieved_goal",
        {"reward_contract": "fail"},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "check", "status", "phrase", "also"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN]
)
def test_broken_env_is_caught_by_its_check(
    make: Callable[[], gym.Env], check: str, status: str, phrase: str, also: dict[str, str]
) -> None:
    report = check_goal_env(make())
    result = report.result(check)
    assert result.status == status, result.message
    assert phrase in result.message
    assert not_pass(report) == {check: status, **also}
    assert report.passed == (status != "fail" and "fail" not in also.values())
    # A check declared advisory ("warn") never fails an env.
    assert all(RANK[r.status] <= RANK[SEVERITY[r.name]] for r in report.results)


def test_an_env_that_declares_the_info_keys_its_reward_reads_passes_reward_info_keys() -> None:
    report = check_goal_env(ce.make_reach(ce.InfoKeyDeclaredEnv))
    result = report.result("reward_info_keys")
    assert result.status == "pass", result.message
    assert (
        result.message
        == "compute_reward reads no info key beyond InfoKeyDeclaredEnv.reward_info_keys ['crashed']."
    )
    assert not_pass(report) == {"empty_infos": "warn"}


def test_empty_infos_check_names_the_fix_and_keeps_goalenvs_warnings_for_training(monkeypatch) -> None:
    message = check_goal_env(ce.make_reach(ce.InfoKeyRequiredEnv)).result("empty_infos").message
    assert "Fix: read each info key with a default" in message and "copy_info_dict=True" in message
    # Parking warns once per process that empty infos lose the crash penalty; the checker's probe with
    # empty infos reports that warning but must not use it up (training would then lose it silently).
    monkeypatch.setattr(goalenvs.core, "_WARNED", set())
    env = gym.make("goalenvs/Parking-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the probe's warnings are caught, not shown
        result = check_goal_env(env, n_steps=30).result("empty_infos")
    assert result.status == "pass"
    assert "compute_reward, compute_terminated and compute_truncated warned then" in result.message
    assert "the crash penalty (collision_reward) is lost in relabelling" in result.message
    with pytest.warns(UserWarning, match="crash penalty"):
        env.unwrapped.compute_reward(np.zeros((2, 6)), np.zeros((2, 6)), [{}, {}])


def test_copies_that_share_a_client_are_kept_so_the_checked_env_stays_usable() -> None:
    # A copy sharing the original's simulator client disconnects it when collected (panda-gym's
    # pybullet envs do): the checker keeps its copies as long as the env, which stays usable.
    env = ce.make_reach(ce.SharedClientEnv)
    report = check_goal_env(env)
    assert report.skipped == []
    gc.collect()
    env.reset(seed=1)
    env.step(env.action_space.sample())


def test_messages_name_cause_and_fix() -> None:
    report = check_goal_env(ce.make_reach(ce.ActionPenaltyEnv))
    message = report.result("reward_contract").message
    assert "first at step 0" in message and "Likely cause" in message and "Fix:" in message


def test_skipped_checks_are_listed_with_a_reason() -> None:
    report = check_goal_env(ce.make_reach(ce.NotDictEnv))
    names = [r.name for r in report.results]
    assert names == ["observation_space", "wrapper_keeps_goals", "compute_reward_defined"]
    assert dict(report.skipped)["reward_contract"] == "the observation space is not a goal space"
    assert "SKIP" in report.format() and "-> FAILED" in report.format()


def test_report_api() -> None:
    report = check_goal_env(ce.make_reach(ce.ActionPenaltyEnv), n_steps=20, seed=3)
    assert not report.passed
    assert [r.name for r in report.failures] == ["reward_contract"]
    data = json.loads(json.dumps(report.to_dict()))
    assert data["passed"] is False and data["env_id"] == "ActionPenaltyEnv"
    assert {"name", "status", "message"} <= set(data["results"][0])
    with pytest.raises(GoalEnvError, match="reward_contract"):
        report.raise_if_failed()
    with pytest.raises(KeyError, match="no result named 'nope'"):
        report.result("nope")
    assert report.summary().startswith("ActionPenaltyEnv: 26 passed, 0 warning(s), 1 failed")


def test_env_is_left_usable_and_seeded() -> None:
    env = ce.make_reach()
    check_goal_env(env, n_steps=30, seed=5)
    first = env.step(env.action_space.sample())  # no reset needed: the checker left it reset
    fresh = ce.make_reach()
    fresh.reset(seed=5)
    assert np.array_equal(env.unwrapped.goal, fresh.unwrapped.goal)
    assert first[0]["observation"].shape == (25,)


def test_user_action_space_is_not_reseeded() -> None:
    env = ce.make_reach()
    env.action_space.seed(123)
    expected = gym.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
    expected.seed(123)
    check_goal_env(env, n_steps=10)
    assert np.array_equal(env.action_space.sample(), expected.sample())


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n_steps": 0}, ValueError),
        ({"n_steps": 2.5}, TypeError),
        ({"n_steps": True}, TypeError),
        ({"seed": -1}, ValueError),
        ({"seed": None}, TypeError),
        ({"timeout": 0}, ValueError),
        ({"timeout": -1.0}, ValueError),
        ({"timeout": float("nan")}, ValueError),
        ({"timeout": float("inf")}, ValueError),
        ({"timeout": 1e7}, ValueError),
        ({"timeout": "60"}, TypeError),
    ],
)
def test_bad_arguments_are_rejected(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error, match=next(iter(kwargs))):
        check_goal_env(ce.make_reach(), **kwargs)


# ---- time limits -----------------------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEEDS_SIGALRM = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no SIGALRM (Windows)")


def _qual(name: str) -> str:
    """How a hang message names a method: with its class from Python 3.11 (``co_qualname``) on."""
    return name if sys.version_info >= (3, 11) else name.rsplit(".", 1)[-1]


def _check_in_subprocess(env_cls: str, timeout: float) -> tuple[dict, float, str]:
    """``check_goal_env`` on ``checker_envs.<env_cls>`` in a fresh process: its report, its seconds and its
    table. A limit that fails to stop the env fails the test at ``subprocess.run``'s own timeout."""
    code = (
        "import json, signal, time\n"
        "from goalenvs import check_goal_env\n"
        "from tests.check import checker_envs as ce\n"
        "t = time.perf_counter()\n"
        f"report = check_goal_env(ce.make_reach(ce.{env_cls}), n_steps=20, timeout={timeout})\n"
        "seconds = time.perf_counter() - t\n"
        "# No alarm left armed, the default handler back:\n"
        "assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)\n"
        "assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL\n"
        "print(json.dumps([report.to_dict(), seconds, str(report)]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=30, check=False,
        env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report, seconds, table = json.loads(result.stdout)
    return report, seconds, table


@NEEDS_SIGALRM
def test_step_looping_forever_fails_the_rollout_and_skips_what_needs_it() -> None:
    report, seconds, table = _check_in_subprocess("HangingStepEnv", timeout=0.5)
    assert 0.5 <= seconds < 10
    results = {r["name"]: (r["status"], r["message"]) for r in report["results"]}
    assert [name for name, (status, _) in results.items() if status != "pass"] == ["rollout"]
    where = f"{_qual('HangingStepEnv.step')} at tests/check/checker_envs.py:"
    assert results["rollout"][1].startswith(
        f"step did not return within the 0.5 s time limit (it was running {where}"
    )
    assert set(results) == {"observation_space", "wrapper_keeps_goals", "compute_reward_defined", "rollout"}
    assert {s["name"] for s in report["skipped"]} == SINGLE_ENV_CHECKS - set(results)
    assert {s["reason"] for s in report["skipped"]} == {"step did not return within the 0.5 s time limit"}
    n_skipped = len(SINGLE_ENV_CHECKS) - 4
    assert table.rstrip().endswith(f"3 passed, 0 warning(s), 1 failed, {n_skipped} skipped -> FAILED")


@NEEDS_SIGALRM
def test_compute_reward_sleeping_forever_fails_once_and_the_other_checks_still_run() -> None:
    report, seconds, _ = _check_in_subprocess("SleepingRewardEnv", timeout=0.5)
    assert 0.5 <= seconds < 10  # one limit waited out, not one per check calling compute_reward
    results = {r["name"]: (r["status"], r["message"]) for r in report["results"]}
    status, message = results["reward_contract"]
    where = f"{_qual('SleepingRewardEnv.compute_reward')} at tests/check/checker_envs.py:"
    assert status == "fail"
    assert message.startswith(
        f"compute_reward did not return within the 0.5 s time limit (it was running {where}"
    )
    needs_reward = {c.name for c in CHECKS if "compute_reward_defined" in c.after} - {"reward_contract"}
    assert {s["name"]: s["reason"] for s in report["skipped"]} == {
        name: "compute_reward did not return within the 0.5 s time limit"
        for name in needs_reward & SINGLE_ENV_CHECKS
    }
    later = ["compute_terminated", "compute_truncated", "reset_seeding", "rollout_determinism", "pickle"]
    assert [results[name][0] for name in later] == ["pass"] * len(later)


@NEEDS_SIGALRM
def test_deadline_interrupts_python_and_restores_the_previous_handler() -> None:
    def previous(signum: int, frame: object) -> None:
        raise AssertionError("the previous handler must not run")

    old = signal.signal(signal.SIGALRM, previous)
    try:
        start = time.perf_counter()
        with pytest.raises(TimeLimitExceeded, match="ran past its 0.2 s time limit"), deadline(0.2):
            time.sleep(30)
        assert 0.2 <= time.perf_counter() - start < 5
        with deadline(5.0):  # a body that ends in time: no alarm left behind
            pass
        assert signal.getsignal(signal.SIGALRM) is previous
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, old)


@NEEDS_SIGALRM
def test_deadline_leaves_a_running_timer_of_another_alone() -> None:
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with deadline(0.05):
            time.sleep(0.2)  # not interrupted: the timer is the other's
        assert fired == [] and signal.getitimer(signal.ITIMER_REAL)[0] > 0
        time.sleep(0.5)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)


def test_check_runs_without_a_limit_off_the_main_thread_and_with_timeout_none() -> None:
    reports: list[CheckReport] = []
    worker = threading.Thread(target=lambda: reports.append(check_goal_env(ce.make_reach(), n_steps=20)))
    worker.start()
    worker.join(60)
    assert not worker.is_alive() and reports[0].passed
    assert check_goal_env(ce.make_reach(), n_steps=20, timeout=None).passed


def test_sys_exit_in_step_fails_the_rollout_and_skips_what_needs_it() -> None:
    report = check_goal_env(ce.make_reach(ce.SysExitStepEnv), n_steps=20)
    result = report.result("rollout")
    assert result.status == "fail"
    assert result.message.startswith("the env called sys.exit(3) in step (at ")
    assert report.skipped and all(why == "step called sys.exit" for _, why in report.skipped)


def test_non_env_is_rejected() -> None:
    with pytest.raises(TypeError, match="gymnasium.Env or gymnasium.vector.VectorEnv"):
        check_goal_env("FetchReach-v4")  # type: ignore[arg-type]


# ---- vector envs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(gym.vector.AutoresetMode), ids=lambda m: m.value)
def test_sync_vector_env_passes_in_every_autoreset_mode(mode: gym.vector.AutoresetMode) -> None:
    env = gym.make_vec(
        "CheckerReach-v0", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    report = check_goal_env(env, n_steps=120)
    assert not_pass(report) == {}
    assert {r.name for r in report.results} == VECTOR_ENV_CHECKS
    assert report.result("vector_batch_reward").message.startswith("compute_reward on each (3,) step batch")
    # 3 sub-envs, 50-step episodes: every episode end is seen, and no autoreset step counts as a transition.
    assert "(3, 7, 32" not in report.result("compute_reward_vectorized").message
    assert "[1, 2, 3, 7, 32]" in report.result("compute_reward_vectorized").message


def test_vector_env_of_broken_envs_fails_the_batch_check() -> None:
    env = gym.vector.SyncVectorEnv([reach(ce.NotVectorizedEnv)] * 2)
    report = check_goal_env(env, n_steps=60)
    assert not_pass(report) == {"compute_reward_vectorized": "fail", "vector_batch_reward": "fail"}
    assert "returns shape (), not (2,)" in report.result("vector_batch_reward").message


# ---- third-party goal envs -------------------------------------------------------------------------


def test_sb3_bit_flipping_env() -> None:
    """SB3's BitFlippingEnv keeps the reward contract, but returns shape (1,) for one transition (a
    warning), and ends episodes on success without a compute_terminated (SB3 issue 627: relabelled
    transitions keep the original goal's done flag), which fails.

    Its discrete-observation variant gets the same verdicts: the checker batches Discrete goals as
    (B, 1), the way SB3's buffer and ours store them (read as (B,), its compute_reward takes the batch
    for one bit string).
    """
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.envs import BitFlippingEnv

    for discrete in (False, True):
        report = check_goal_env(BitFlippingEnv(n_bits=8, discrete_obs_space=discrete))
        assert not_pass(report) == {"compute_reward_vectorized": "warn", "compute_terminated": "fail"}
        assert "returns shape (1,), not a scalar" in report.result("compute_reward_vectorized").message
        message = report.result("compute_terminated").message
        assert "1 of 1 terminations in the rollout, first at step 99, came with the goal reached" in message
        assert "stable-baselines3 issue 627" in message


def test_highway_parking_breaks_the_reward_contract_on_collision() -> None:
    """parking-v0 adds its collision penalty (-5) in step, outside compute_reward.

    With seed 0 the random rollout hits a wall at step 52; HER would relabel that transition with a
    reward that forgets the crash.
    """
    pytest.importorskip("highway_env")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("highway_env:parking-v0")
        report = check_goal_env(env, n_steps=60)
    assert not_pass(report) == {"reward_contract": "fail"}
    message = report.result("reward_contract").message
    assert "first at step 52: step gave -5.73" in message and "compute_reward gives -0.73" in message


def test_gymnasium_robotics_point_maze() -> None:
    """PointMaze (MuJoCo) keeps the reward contract; its flaws are advisory with the default continuing task:
    info says "success" not "is_success", compute_terminated/compute_truncated return one bool for a
    batch (right values, wrong shape), and copies are EzPickle recipes, not snapshots. With
    continuing_task=False, compute_terminated's single bool for a batch is wrong: a failure."""
    gymnasium_robotics = pytest.importorskip("gymnasium_robotics")
    gym.register_envs(gymnasium_robotics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check_goal_env(gym.make("PointMaze_UMaze-v3"), n_steps=100)
        episodic = check_goal_env(gym.make("PointMaze_UMaze-v3", continuing_task=False), n_steps=100)
    assert report.passed
    assert not_pass(report) == {
        "is_success": "warn", "compute_terminated": "warn", "compute_truncated": "warn", "deepcopy": "warn",
    }  # fmt: skip
    assert "it has ['success']" in report.result("is_success").message
    assert "EzPickle" in report.result("deepcopy").message
    assert not_pass(episodic)["compute_terminated"] == "fail"
    assert "returns shape () instead of (2,)" in episodic.result("compute_terminated").message


def test_panda_gym_copies_are_warnings_and_the_env_stays_usable() -> None:
    """panda-gym's copies share one pybullet client: stepping a copy moves the original, and a collected
    copy disconnects it. HER never copies an env, so that is a warning, and the checker keeps its copies
    so that the env it was given still steps. The other verdicts vary from run to run (unseeded resets
    re-seed the task from the OS; pybullet's contact cache outlives reset), so only their kinds are pinned."""
    pytest.importorskip("panda_gym")
    env = gym.make("panda_gym:PandaReach-v3")
    report = check_goal_env(env, n_steps=100)
    for name in ("deepcopy", "pickle"):
        assert report.result(name).status == "warn", report.format()
        assert "the copy and the original disagree" in report.result(name).message
    assert set(not_pass(report)) <= {
        "compute_terminated", "compute_reward_pure", "rollout_determinism", "deepcopy", "pickle",
    }, report.format()  # fmt: skip
    gc.collect()
    env.reset(seed=1)
    env.step(env.action_space.sample())
    env.close()


# ---- every goalenvs env ----------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", make_params())
def test_every_goalenvs_env_passes(env_id: str) -> None:
    env = gym.make(env_id)
    report = check_goal_env(env)
    assert report.passed, report.format()
    assert report.warnings == [], report.format()
    env.close()


@pytest.mark.parametrize("env_id", make_params([e for e in goalenvs.ENVS if e.vector_entry_point]))
def test_every_goalenvs_vector_env_passes(env_id: str) -> None:
    env = gym.make_vec(env_id, num_envs=4, vectorization_mode="vector_entry_point")
    report = check_goal_env(env, n_steps=100)
    assert report.passed, report.format()
    assert report.warnings == [], report.format()
    assert report.result("vector_batch_reward").status == "pass"
    env.close()


def test_native_vector_env_with_same_step_autoreset_passes() -> None:
    # SAME_STEP puts the final observations in info["final_obs"], Gymnasium's object array of dicts, or
    # with batched_final_obs=True one dict of batched arrays; the checker reads both.
    for batched in (False, True):
        env = gym.make_vec("goalenvs/BitFlip-v0", num_envs=4, vectorization_mode="vector_entry_point",
                           autoreset_mode="SameStep", n_bits=3, batched_final_obs=batched)  # fmt: skip
        report = check_goal_env(env, n_steps=60)
        assert report.passed, report.format()
        assert report.result("reward_contract").status == "pass"
