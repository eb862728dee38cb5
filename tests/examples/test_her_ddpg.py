"""The compact DDPG+HER example: its pieces, its outputs, checkpoints and resume, and its input errors."""

from __future__ import annotations

import csv
import json
import pickle
import re
import shutil
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("matplotlib")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import her_ddpg  # noqa: E402
import nets  # noqa: E402

from tests.examples.folder_checks import fails  # noqa: E402

# A run of seconds: 2 envs, 3 cycles of 2 updates per epoch, a tiny network.
TINY = ["--env", "goalenvs/FetchReach-v0", "--n-envs", "2", "--n-cycles", "3", "--n-batches", "2",
        "--batch-size", "32", "--hidden", "16", "--layers", "2", "--buffer-size", "2000",
        "--eval-episodes", "3", "--save-freq", "1", "--no-gif"]  # fmt: skip


def test_normalizer_matches_numpy_and_clips() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(500, 4))
    norm = her_ddpg.Normalizer(4, eps=0.01, clip=5.0)
    norm.update(data[:200])
    norm.update(data[200:])
    np.testing.assert_allclose(norm.mean, data.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm.std, data.std(0), rtol=1e-5)
    out = norm(np.full((1, 4), 1e6, np.float32))
    assert np.all(out == 5.0)
    flat = her_ddpg.Normalizer(2, eps=0.01, clip=5.0)
    flat.update(np.ones((10, 2)))
    assert np.all(flat.std == np.float32(0.01))  # a constant input divides by eps, not by 0


def test_normalizer_state_is_its_statistics_and_its_clip_is_the_runs_setting() -> None:
    rng = np.random.default_rng(1)
    norm = her_ddpg.Normalizer(3, eps=0.01, clip=5.0)
    norm.update(rng.normal(size=(50, 3)))
    state = norm.state_dict()
    assert set(state) == {"sum", "sumsq", "count", "mean", "std"}
    wide = her_ddpg.Normalizer(3, eps=0.01, clip=10.0)
    wide.load_state_dict({**state, "eps": 0.5, "clip": 5.0})  # a checkpoint written before: settings win
    assert wide.clip == 10.0 and wide.eps == 0.01 and wide.count == 50
    np.testing.assert_array_equal(wide.std, norm.std)
    x = (norm.mean + np.array([[0.0, 7.0, -12.0]]) * norm.std).astype(np.float32)
    np.testing.assert_allclose(wide(x), [[0.0, 7.0, -10.0]], atol=1e-4)


def test_future_goals_come_from_the_same_episode_at_or_after_the_step() -> None:
    n, steps = 3, 50
    # achieved goal of env e after step t is (e, t, 0): the relabelled goal tells where it came from.
    achieved = np.stack(
        [*np.meshgrid(np.arange(n), np.arange(steps), indexing="ij"), np.zeros((n, steps))], -1
    )
    goals, use = her_ddpg.hindsight_goals(achieved, np.random.default_rng(1), share=0.8)
    assert goals.shape == (n, steps, 3) and use.shape == (n, steps)
    assert np.all(goals[..., 0] == np.arange(n)[:, None])  # same env
    assert np.all(goals[..., 1] >= np.arange(steps))  # at or after the step
    assert 0.7 < use.mean() < 0.9


def test_update_clips_targets_and_moves_both_networks() -> None:
    cfg = her_ddpg.Config(hidden=8, layers=1, bf16=False)
    agent = her_ddpg.Agent(cfg, obs_dim=5, goal_dim=3, act_dim=4)
    rng = np.random.default_rng(0)
    b = 16

    def obs() -> dict:
        return {"observation": rng.normal(size=(b, 5)).astype(np.float32),
                "desired_goal": rng.normal(size=(b, 3)).astype(np.float32)}  # fmt: skip

    batch = {"observations": obs(), "next_observations": obs(), "rewards": -np.ones(b, np.float32),
             "actions": rng.uniform(-1, 1, (b, 4)).astype(np.float32), "terminateds": np.zeros(b, np.float32)}  # fmt: skip
    actor0 = [p.clone() for p in agent.actor.parameters()]
    critic0 = [p.clone() for p in agent.critic.parameters()]
    target0 = [p.clone() for p in agent.critic_target.parameters()]
    agent.updates([batch])
    assert any(not torch.equal(a, p) for a, p in zip(actor0, agent.actor.parameters(), strict=True))
    assert any(not torch.equal(a, p) for a, p in zip(critic0, agent.critic.parameters(), strict=True))
    assert all(torch.equal(a, p) for a, p in zip(target0, agent.critic_target.parameters(), strict=True))
    agent.update_targets()
    for t0, t, p in zip(target0, agent.critic_target.parameters(), agent.critic.parameters(), strict=True):
        torch.testing.assert_close(t, 0.95 * t0 + 0.05 * p)


def _batch(rng: np.random.Generator, b: int = 16) -> dict:
    def obs() -> dict:
        return {"observation": rng.normal(size=(b, 5)).astype(np.float32),
                "desired_goal": rng.normal(size=(b, 3)).astype(np.float32)}  # fmt: skip

    return {"observations": obs(), "next_observations": obs(), "rewards": -rng.integers(0, 2, b).astype(np.float32),
            "actions": rng.uniform(-1, 1, (b, 4)).astype(np.float32), "terminateds": np.zeros(b, np.float32)}  # fmt: skip


@pytest.mark.parametrize("bf16", [True, False])
def test_updates_take_the_textbook_steps_in_turn_bit_for_bit(bf16: bool) -> None:
    """``Agent.updates`` is the textbook order, batch by batch, bit for bit: critic step; actor loss through
    the stepped critic; actor step."""
    import copy

    cfg = her_ddpg.Config(hidden=32, layers=2, bf16=bf16)
    torch.manual_seed(0)
    agent = her_ddpg.Agent(cfg, obs_dim=5, goal_dim=3, act_dim=4)
    rng = np.random.default_rng(0)
    agent.o_norm.update(rng.normal(size=(50, 5)))
    agent.g_norm.update(rng.normal(size=(50, 3)))
    agent.critic_target.requires_grad_(False)
    for p in agent.actor_target.parameters():  # targets apart from the networks, so that mixing them up shows
        p.data.mul_(0.5)
    for p in agent.critic_target.parameters():
        p.data.add_(0.1)
    plain = copy.deepcopy(agent)
    batches = [_batch(rng) for _ in range(4)]
    drawn: list[int] = []

    def lazily():
        for i, batch in enumerate(batches):
            drawn.append(i)
            yield batch

    agent.updates(lazily())
    assert drawn == [0, 1, 2, 3]
    for batch in batches:
        obs, nxt = batch["observations"], batch["next_observations"]
        x = plain.inputs(obs["observation"], obs["desired_goal"])
        x2 = plain.inputs(nxt["observation"], nxt["desired_goal"])
        a = torch.from_numpy(batch["actions"])
        with torch.no_grad():
            q2 = plain.critic_target(torch.cat([x2, torch.tanh(plain.actor_target(x2))], 1))
            target = (torch.from_numpy(batch["rewards"])[:, None] + cfg.gamma * q2).clamp(
                -1 / (1 - cfg.gamma), 0
            )
        plain.critic_opt.zero_grad()
        (plain.critic(torch.cat([x, a], 1)) - target).pow(2).mean().backward()
        plain.critic_opt.step()
        plain.actor_opt.zero_grad()
        pi = torch.tanh(plain.actor(x))
        (-plain.critic(torch.cat([x, pi], 1)).mean() + cfg.action_l2 * pi.pow(2).mean()).backward()
        plain.actor_opt.step()
    for net in ("actor", "critic"):
        for p, q in zip(getattr(agent, net).parameters(), getattr(plain, net).parameters(), strict=True):
            assert torch.equal(p, q), net


def test_nstep_target_is_the_lambda_weighted_mean_of_the_i_step_returns_within_the_episode() -> None:
    """MHER(lambda): y = sum_i w_i y_i / sum_i w_i, w_i = lambda^(i-1) where step t+i-1 is in the episode,
    y_i = sum_{j<i} gamma^j r_{t+j} + gamma^i (1 - terminated_{t+i-1}) Q'(s_{t+i}, pi'(s_{t+i})); clipped."""
    cfg = her_ddpg.Config(hidden=16, layers=2, bf16=False, n_step=3, mher_lambda=0.5, gamma=0.9)
    torch.manual_seed(0)
    agent = her_ddpg.Agent(cfg, obs_dim=5, goal_dim=3, act_dim=4)
    rng = np.random.default_rng(1)
    b, n = 6, 3
    batch = _batch(rng, b)
    batch["nstep_observations"] = {"observation": rng.normal(size=(b, n, 5)).astype(np.float32),
                                   "desired_goal": rng.normal(size=(b, n, 3)).astype(np.float32)}  # fmt: skip
    batch["nstep_rewards"] = -rng.integers(0, 2, (b, n)).astype(np.float32)
    batch["nstep_terminateds"] = np.zeros((b, n), np.float32)
    batch["nstep_valid"] = np.ones((b, n), np.float32)
    batch["nstep_valid"][1, 2:] = batch["nstep_valid"][2, 1:] = 0.0  # episodes ending after 2 and 1 steps
    batch["nstep_terminateds"][3, 1] = 1.0  # ... and one terminated on its second step
    batch["nstep_valid"][3, 2:] = 0.0
    _, _, target = agent.targets(batch)
    for row in range(b):
        returns, weights = [], []
        for i in range(1, n + 1):
            if not batch["nstep_valid"][row, i - 1]:
                continue
            nxt = batch["nstep_observations"]
            x = agent.inputs(nxt["observation"][row, i - 1 : i], nxt["desired_goal"][row, i - 1 : i])
            with torch.no_grad():
                q = float(agent.critic_target(torch.cat([x, torch.tanh(agent.actor_target(x))], 1)))
            rewards = sum(cfg.gamma**j * float(batch["nstep_rewards"][row, j]) for j in range(i))
            done = float(batch["nstep_terminateds"][row, i - 1])
            returns.append(rewards + cfg.gamma**i * (1 - done) * q)
            weights.append(cfg.mher_lambda ** (i - 1))
        expected = min(max(np.dot(weights, returns) / sum(weights), -1 / (1 - cfg.gamma)), 0.0)
        assert float(target[row, 0]) == pytest.approx(expected, rel=1e-5, abs=1e-6), row


def test_a_run_begun_before_a_setting_existed_resumes_with_its_default(tmp_path: Path, capsys) -> None:
    """A run folder whose config.json and checkpoint lack a setting added since (here n_step and
    mher_lambda) resumes, with that setting's default (the behaviour the run had), and refuses a
    config.json that sets one otherwise; a new run with --n-step 3 trains, resumes and records it."""
    out = tmp_path / "old"
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out)])
    config = json.loads((out / "config.json").read_text())
    old = {k: v for k, v in config.items() if k not in ("n_step", "mher_lambda")}
    manifest_path = _checkpoint(out) / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    for key in ("n_step", "mher_lambda"):
        del manifest["meta"]["config"][key]
    manifest_path.write_text(json.dumps(manifest))
    (out / "config.json").write_text(json.dumps({**old, "n_step": 3}))  # edited: not what the run ran with
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "2", "--no-gif"])
    assert (
        "sets {'n_step': 3}, settings its checkpoint predates; accepted: their defaults {'n_step': 1}" in line
    )
    (out / "config.json").write_text(json.dumps(old))
    her_ddpg.main(["--resume", str(out), "--epochs", "2", "--no-gif"])
    assert json.loads((out / "config.json").read_text())["n_step"] == 1
    assert [int(r["epoch"]) for r in _rows(out)] == [1, 2]
    new = tmp_path / "new"
    her_ddpg.main([*TINY, "--epochs", "1", "--n-step", "3", "--output", str(new)])
    her_ddpg.main(["--resume", str(new), "--epochs", "2", "--no-gif"])
    assert json.loads((new / "config.json").read_text())["n_step"] == 3
    assert _state(new)["updates"] == 12


def test_a_resume_keeps_the_runs_checkpoint_frequency_and_the_curve_has_lf_line_ends(
    tmp_path: Path, capsys
) -> None:
    """--resume without --save-freq checkpoints as the run was launched (here every epoch), not every 5."""
    out = tmp_path / "run"
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out)])  # TINY: --save-freq 1
    her_ddpg.main(["--resume", str(out), "--epochs", "3", "--no-gif"])
    rows = _rows(out)
    assert float(rows[2]["t_checkpoint"]) > float(rows[1]["t_checkpoint"])  # epoch 2 wrote one
    assert json.loads((_checkpoint(out) / "MANIFEST.json").read_text())["meta"]["save_freq"] == 1
    her_ddpg.main(["--resume", str(out), "--epochs", "4", "--save-freq", "3", "--no-gif"])  # given: it wins
    assert json.loads((_checkpoint(out) / "MANIFEST.json").read_text())["meta"]["save_freq"] == 3
    assert b"\r" not in (out / "eval.csv").read_bytes()
    manifest_path = _checkpoint(out) / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["meta"]["save_freq"] = "3"  # not a number of epochs: refused before anything is written
    manifest_path.write_text(json.dumps(manifest))
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "5", "--no-gif"])
    assert "key save_freq: '3' is not accepted" in line and "give --save-freq N" in line
    assert [int(r["epoch"]) for r in _rows(out)] == [1, 2, 3, 4]
    # The way out it names:
    her_ddpg.main(["--resume", str(out), "--epochs", "5", "--save-freq", "1", "--no-gif"])
    assert [int(r["epoch"]) for r in _rows(out)] == [1, 2, 3, 4, 5]


def _rows(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "eval.csv").open()))


def _checkpoint(out: Path) -> Path:
    """The one whole checkpoint folder of a run."""
    (found,) = [p for p in (out / "checkpoints").iterdir() if p.name.isdigit()]
    return found


def test_run_writes_curve_plot_checkpoint_and_gif(tmp_path: Path) -> None:
    out = tmp_path / "run"
    success = her_ddpg.main([*TINY, "--epochs", "2", "--output", str(out)])
    assert 0.0 <= success <= 1.0
    rows = _rows(out)
    assert [int(r["epoch"]) for r in rows] == [1, 2]
    assert [int(r["env_steps"]) for r in rows] == [300, 600]  # 3 cycles x 2 envs x 50 steps per epoch
    assert [int(r["updates"]) for r in rows] == [6, 12]
    assert float(rows[-1]["success_rate"]) == success
    for name in ("success.png", "config.json", "commands.txt"):
        assert (out / name).stat().st_size > 0, name
    checkpoint = _checkpoint(out)
    assert checkpoint.name == "000000000002"  # the epoch-1 checkpoint was removed once this one was whole
    assert sorted(p.name for p in checkpoint.iterdir()) == [
        "MANIFEST.json",
        "agent.pt",
        "envs.pkl",
        "storage.pkl",
    ]
    with (checkpoint / "storage.pkl").open("rb") as f:
        assert pickle.load(f).num_transitions == 600
    written = json.loads((out / ".run-manifest.json").read_text())
    assert written["script"] == "her_ddpg.py"
    assert set(written["files"]) == {
        ".lock",
        "checkpoints",
        "commands.txt",
        "config.json",
        "eval.csv",
        "success.png",
    }
    assert sorted(p.name for p in out.iterdir()) == sorted([*written["files"], ".run-manifest.json"])
    # nets.load_policy: the checkpoint's greedy policy, as the run's own agent acts.
    policy, run = nets.load_policy(out)
    assert run["env_id"] == "goalenvs/FetchReach-v0"
    cfg = her_ddpg.Config(**json.loads((checkpoint / "MANIFEST.json").read_text())["meta"]["config"])
    agent = her_ddpg.Agent(cfg, 10, 3, 4)
    agent.load_state_dict(torch.load(checkpoint / "agent.pt", weights_only=False)["agent"])
    obs = {"observation": np.random.default_rng(0).normal(size=(5, 10)), "desired_goal": np.ones((5, 3))}
    np.testing.assert_array_equal(policy(obs), agent.pi(obs["observation"], obs["desired_goal"]))
    with pytest.raises(nets.RunError, match="^--policy: .* has no checkpoint yet"):
        shutil.rmtree(checkpoint)
        nets.load_policy(out)


def test_a_checkpoint_holds_what_was_stored_not_the_storage_capacity(tmp_path: Path) -> None:
    """A 400-step run with room for 200k transitions: its checkpoint is the size of 400 steps."""
    out = tmp_path / "run"
    her_ddpg.main(
        [*TINY, "--n-cycles", "4", "--buffer-size", "200000", "--epochs", "1", "--output", str(out)]
    )
    assert sum(p.stat().st_size for p in _checkpoint(out).iterdir()) < 2_000_000


def test_a_shadow_hand_task_trains_and_its_policy_acts_in_the_hand_env(tmp_path: Path) -> None:
    """The recipe runs the hand tasks too (goalenvs/Hand*, Plappert et al., 2018): HandReach's 63 + 15
    inputs and 20 actions, a curve row, and a policy that acts in a fresh env of the task."""
    out = tmp_path / "run"
    her_ddpg.main([*TINY, "--env", "goalenvs/HandReach-v0", "--epochs", "1", "--output", str(out)])
    assert [int(r["env_steps"]) for r in _rows(out)] == [300]
    policy, run = nets.load_policy(out)
    assert run["env_id"] == "goalenvs/HandReach-v0"
    env = gym.make("goalenvs/HandReach-v0")
    obs, _ = env.reset(seed=0)
    action = policy({key: value[None] for key, value in obs.items()})
    assert action.shape == (1, 20) and env.action_space.contains(action[0].astype(np.float32))
    env.close()


def test_gif_of_the_greedy_policy(tmp_path: Path) -> None:
    import gymnasium as gym

    try:
        env = gym.make("goalenvs/FetchReach-v0", render_mode="rgb_array", width=32, height=32)
        env.reset(seed=0)
        env.render()
    except gym.error.DependencyNotInstalled as exc:  # no EGL/OSMesa here, or mujoco chose GLFW first
        pytest.skip(f"MuJoCo cannot render here: {exc}")
    imageio = pytest.importorskip("imageio.v2")
    agent = her_ddpg.Agent(her_ddpg.Config(hidden=8, layers=1), obs_dim=10, goal_dim=3, act_dim=4)
    policy = lambda obs: agent.pi(obs["observation"], obs["desired_goal"])  # noqa: E731
    frames = imageio.mimread(nets.record_gif(policy, "goalenvs/FetchReach-v0", 0, episodes=2, size=32))
    assert len(frames) == 2 * 51 and frames[0].shape[:2] == (32, 32)  # reset frame + 50 steps each


def _state(out: Path) -> dict:
    return torch.load(_checkpoint(out) / "agent.pt", weights_only=False)


def test_resume_is_bit_for_bit_the_uninterrupted_run(tmp_path: Path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    her_ddpg.main([*TINY, "--epochs", "3", "--output", str(whole)])
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(split)])
    her_ddpg.main(["--resume", str(split), "--epochs", "3", "--no-gif"])
    a, b = _state(whole), _state(split)
    assert a["epoch"] == b["epoch"] == 3 and a["updates"] == b["updates"] == 18
    for net in ("actor", "critic", "actor_target", "critic_target"):
        for key, value in a["agent"][net].items():
            assert torch.equal(value, b["agent"][net][key]), (net, key)
    with (_checkpoint(whole) / "envs.pkl").open("rb") as f, (_checkpoint(split) / "envs.pkl").open("rb") as g:
        ea, eb = pickle.load(f), pickle.load(g)
    assert ea["rng"] == eb["rng"]  # exploration; and each env's own stream:
    assert [r.bit_generator.state for r in ea["envs"]] == [r.bit_generator.state for r in eb["envs"]]
    with (
        (_checkpoint(whole) / "storage.pkl").open("rb") as f,
        (_checkpoint(split) / "storage.pkl").open("rb") as g,
    ):
        sa, sb = pickle.load(f), pickle.load(g)
    assert sa.num_transitions == sb.num_transitions == 900  # every transition kept
    assert sa.reward_fn is None  # pickled without the env behind it; a run sets it on load
    from goalenvs.envs.fetch import FetchEnv

    sa.reward_fn = sb.reward_fn = FetchEnv(task="reach").compute_reward
    assert np.array_equal(sa.sample_arrays(64)["actions"], sb.sample_arrays(64)["actions"])
    ra, rb = _rows(whole), _rows(split)
    assert [r["success_rate"] for r in ra] == [r["success_rate"] for r in rb]
    assert [int(r["epoch"]) for r in rb] == [1, 2, 3]  # appended to the same curve
    assert len((split / "commands.txt").read_text().splitlines()) == 2


def test_lr_decay_scales_both_learning_rates_per_epoch_and_a_resumed_run_keeps_the_schedule(
    tmp_path: Path,
) -> None:
    """``--lr-decay F`` runs epoch ``e`` (from 0) at ``F ** e`` times each learning rate, set at the epoch's
    start: a run resumed after epoch 1 ends bit for bit as the uninterrupted one, and differs from a run
    without the decay."""
    whole, split, constant = tmp_path / "whole", tmp_path / "split", tmp_path / "constant"
    decay = ["--lr-decay", "0.5", "--lr-actor", "0.004", "--lr-critic", "0.002"]
    her_ddpg.main([*TINY, *decay, "--epochs", "3", "--output", str(whole)])
    her_ddpg.main([*TINY, *decay, "--epochs", "1", "--output", str(split)])
    her_ddpg.main(["--resume", str(split), "--epochs", "3", "--no-gif"])
    her_ddpg.main([*TINY, *decay[2:], "--epochs", "3", "--output", str(constant)])
    a, b, c = _state(whole)["agent"], _state(split)["agent"], _state(constant)["agent"]
    assert a["actor_opt"]["param_groups"][0]["lr"] == b["actor_opt"]["param_groups"][0]["lr"] == 0.004 * 0.25
    assert a["critic_opt"]["param_groups"][0]["lr"] == 0.002 * 0.25
    assert c["actor_opt"]["param_groups"][0]["lr"] == 0.004
    for net in ("actor", "critic"):
        assert all(torch.equal(v, b[net][k]) for k, v in a[net].items()), net
        assert not all(torch.equal(v, c[net][k]) for k, v in a[net].items()), net


def test_the_averaged_policy_follows_the_actor_by_policy_polyak_and_only_the_greedy_policy_uses_it(
    tmp_path: Path,
) -> None:
    """Under ``policy_polyak`` the greedy policy is a running average of the actor's weights, moved each
    cycle as the target actor is (with ``policy_polyak == polyak`` it is the target actor, bit for bit);
    exploration acts with the actor, so training learns exactly what it learns without the average. The
    average is kept in the checkpoints and resumes bit for bit."""
    cfg = her_ddpg.Config(hidden=16, layers=2, policy_polyak=0.95)
    torch.manual_seed(0)
    agent = her_ddpg.Agent(cfg, obs_dim=5, goal_dim=3, act_dim=4)
    rng = np.random.default_rng(0)
    agent.o_norm.update(rng.normal(size=(50, 5)))
    agent.g_norm.update(rng.normal(size=(50, 3)))
    for _ in range(3):
        agent.updates([_batch(rng) for _ in range(2)])
        agent.update_targets()
    for a, t, p in zip(agent.greedy.parameters(), agent.actor_target.parameters(), agent.actor.parameters(), strict=True):  # fmt: skip
        assert torch.equal(a, t) and not torch.equal(a, p)
    obs, goal = rng.normal(size=(4, 5)), rng.normal(size=(4, 3))
    with torch.no_grad():
        actor = torch.tanh(agent.actor(agent.inputs(obs, goal))).numpy()
        average = torch.tanh(agent.actor_target(agent.inputs(obs, goal))).numpy()
    assert np.array_equal(agent.pi(obs, goal, greedy=False), actor)
    assert np.array_equal(agent.pi(obs, goal), average) and not np.array_equal(actor, average)

    plain, averaged, split = tmp_path / "plain", tmp_path / "averaged", tmp_path / "split"
    her_ddpg.main([*TINY, "--epochs", "2", "--output", str(plain)])
    her_ddpg.main([*TINY, "--epochs", "2", "--policy-polyak", "0.5", "--output", str(averaged)])
    her_ddpg.main([*TINY, "--epochs", "1", "--policy-polyak", "0.5", "--output", str(split)])
    her_ddpg.main(["--resume", str(split), "--epochs", "2", "--no-gif"])
    a, b, c = _state(plain), _state(averaged), _state(split)
    for net in ("actor", "critic", "actor_target", "critic_target"):  # the same training
        assert all(torch.equal(v, b["agent"][net][k]) for k, v in a["agent"][net].items()), net
    assert "actor_average" not in a["agent"]
    average = b["agent"]["actor_average"]
    assert not all(torch.equal(v, average[k]) for k, v in b["agent"]["actor"].items())
    assert all(torch.equal(v, c["agent"]["actor_average"][k]) for k, v in average.items())  # resumed exactly


@pytest.mark.parametrize("flush", [True, False])
def test_adam_steps_flush_subnormals_and_leave_the_thread_as_it_was(
    flush: bool, request: pytest.FixtureRequest
) -> None:
    """Under ``flush_denormals`` a subnormal second moment reads as zero, so a step with a zero gradient
    leaves it at zero instead of decaying it through the CPU's slow subnormal path; without it, it decays.
    Outside the step, the thread keeps subnormal floats either way. (One torch thread, the script's
    default: torch's other threads keep subnormals, so with more their share of a step is not flushed.)"""
    tiny = 1e-39  # subnormal in float32 (the smallest normal is 1.2e-38)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    request.addfinalizer(lambda: torch.set_num_threads(threads))
    agent = her_ddpg.Agent(
        her_ddpg.Config(hidden=8, layers=1, flush_denormals=flush), obs_dim=5, goal_dim=3, act_dim=4
    )
    for p in agent.critic.parameters():
        p.grad = torch.zeros_like(p)
    agent.critic_opt.step()  # the optimizer's state, all zero
    moments = [state["exp_avg_sq"] for state in agent.critic_opt.state.values()]
    for v in moments:
        v.fill_(tiny)
    zero = sum((p * 0).sum() for p in agent.critic.parameters())  # a loss of zero gradient
    agent.step(agent.critic_opt, agent.backward(zero, agent.critic_opt, 0))
    v = torch.cat([m.ravel() for m in moments])
    if flush:
        assert torch.all(v == 0)
    else:
        assert torch.all((v > 0) & (v < tiny))  # 0.999 of it
    assert (torch.tensor([tiny]) * 1.0).item() != 0.0  # the thread's mode is back


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--env", "goalenvs/BitFlip-v0"],
            "--env-id: 'goalenvs/BitFlip-v0' is not accepted; accepted: one of",
        ),
        (
            ["--env", "NoSuchEnv-v0"],
            "--env-id: 'NoSuchEnv-v0' is not accepted; accepted: one of ['goalenvs/Fetch",
        ),
        (["--epochs", "0"], "--epochs: 0 is not accepted; accepted: an integer, 1 <= epochs"),
        (["--batch-size", "-3"], "--batch-size: -3 is not accepted; accepted: an integer, 1 <= batch_size"),
        (["--save-freq", "-1"], "--save-freq: '-1' is not accepted: expected an integer >= 0"),
        (["--epochs", "x"], "--epochs: invalid int value"),
        (["--seed", "-1"], "--seed: -1 is not accepted; accepted: an integer, 0 <= seed <= 4294967295"),
        (["--gamma", "nan"], "--gamma: nan is not accepted; accepted: a finite number, 0.0 <= gamma < 1.0"),
        (["--gamma", "1"], "--gamma: 1.0 is not accepted"),
        (["--polyak", "7"], "--polyak: 7.0 is not accepted; accepted: a finite number, 0.0 <= polyak <= 1.0"),
        (
            ["--policy-polyak", "1"],
            "--policy-polyak: 1.0 is not accepted; accepted: a finite number, 0.0 <= policy_polyak < 1.0",
        ),
        (
            ["--noise-eps", "-3"],
            "--noise-eps: -3.0 is not accepted; accepted: a finite number, 0.0 <= noise_eps",
        ),
        (["--random-eps", "2"], "--random-eps: 2.0 is not accepted"),
        (["--lr-actor", "0"], "--lr-actor: 0.0 is not accepted; accepted: a finite number, 0.0 < lr_actor"),
        (["--lr-critic", "inf"], "--lr-critic: inf is not accepted"),
        (["--norm-eps", "-1"], "--norm-eps: -1.0 is not accepted"),
        (["--evaluate", "3"], "--evaluate: needs --resume RUN_DIR"),
        (
            ["--env", "goalenvs/FetchReach-v0", "--n-envs", "2", "--buffer-size", "60"],
            "--buffer-size: 60 is not accepted; accepted: at least 2 envs x 50 steps = 100",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(argv, message, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main([*argv, "--output", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("her_ddpg.py: error: ") and message in err[0], err
    assert not out.exists()


@pytest.mark.parametrize(
    ("yaml_entry", "message"),
    [
        ("gamma: 5", "key gamma: 5 is not accepted; accepted: a finite number, 0.0 <= gamma < 1.0"),
        ("gamma: .nan", "key gamma: nan is not accepted"),
        ("polyak: -0.5", "key polyak: -0.5 is not accepted"),
        ("epochs: 2.5", "key epochs: 2.5 is not accepted; accepted: an integer"),
        ("buffer_size: 1e6", "key buffer_size: '1e6' is not accepted; accepted: an integer"),
        ("n_envs: true", "key n_envs: True is not accepted"),
        ("bf16: 3", "key bf16: 3 is not accepted; accepted: true or false"),
        ("fused_adam: yes please", "key fused_adam: 'yes please' is not accepted; accepted: true or false"),
        ("flush_denormals: 0", "key flush_denormals: 0 is not accepted; accepted: true or false"),
        ("n_cycle: 1", "has unknown keys ['n_cycle']"),
    ],
)
def test_conf_file_values_are_range_checked_naming_file_and_key(
    yaml_entry, message, tmp_path, capsys
) -> None:
    conf = tmp_path / "conf.yml"
    conf.write_text(f"goalenvs/FetchReach-v0:\n  {yaml_entry}\n")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main(["--env", "goalenvs/FetchReach-v0", "--conf-file", str(conf), "--output", str(out)])
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"her_ddpg.py: error: --conf-file: {conf}") and message in line, line
    assert not out.exists()


def test_refuses_a_non_empty_output_and_a_resume_without_checkpoint(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main([*TINY, "--output", str(out)])
    assert exc.value.code == 2 and "is not empty" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main(["--resume", str(out)])
    assert exc.value.code == 2 and "is not a run folder" in capsys.readouterr().err


def test_conf_file_entry_applies_and_options_override_it(tmp_path, capsys) -> None:
    conf = tmp_path / "conf.yml"
    conf.write_text("goalenvs/FetchReach-v0:\n  n_cycles: 1\n  n_envs: 3\n  hidden: 8\n")
    out = tmp_path / "run"
    her_ddpg.main([*TINY, "--conf-file", str(conf), "--epochs", "1", "--output", str(out)])
    saved = json.loads((out / "config.json").read_text())
    assert saved["n_envs"] == 2 and saved["hidden"] == 16  # the options given win
    assert saved["n_cycles"] == 3  # TINY sets it too
    conf.write_text("goalenvs/FetchReach-v0:\n  n_cycles: 1\n")
    her_ddpg.main(["--env", "goalenvs/FetchReach-v0", "--conf-file", str(conf), "--epochs", "1", "--n-envs", "2",
                   "--n-batches", "1", "--batch-size", "8", "--hidden", "8", "--eval-episodes", "1",
                   "--buffer-size", "1000", "--no-gif", "--output", str(tmp_path / "run2")])  # fmt: skip
    assert json.loads((tmp_path / "run2" / "config.json").read_text())["n_cycles"] == 1  # from the file
    conf.write_text("goalenvs/FetchReach-v0:\n  n_cycle: 1\n")
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main(
            ["--env", "goalenvs/FetchReach-v0", "--conf-file", str(conf), "--output", str(tmp_path / "x")]
        )
    assert exc.value.code == 2 and "unknown keys ['n_cycle']" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_evaluate_reports_a_checkpoint_and_writes_nothing(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out)])
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    success = her_ddpg.main(["--resume", str(out), "--evaluate", "4"])
    assert 0.0 <= success <= 1.0 and "over 4 episodes" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    with pytest.raises(SystemExit) as exc:
        her_ddpg.main(["--evaluate", "4", "--output", str(tmp_path / "x")])
    assert exc.value.code == 2 and "--evaluate: needs --resume" in capsys.readouterr().err


def test_bf16_defaults_to_what_the_cpu_computes_natively_and_is_recorded(
    tmp_path, monkeypatch, capsys
) -> None:
    flags = set()
    if Path("/proc/cpuinfo").exists():  # Linux: the kernel's own list of the CPU's instruction sets
        flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
        assert her_ddpg.native_bf16() == bool(flags & {"avx512_bf16", "amx_bf16"})
    for native in (True, False):
        monkeypatch.setattr(her_ddpg, "native_bf16", lambda native=native: native)
        assert her_ddpg.Config().bf16 is native
        out = tmp_path / f"run_{native}"
        her_ddpg.main([*TINY, "--epochs", "1", "--save-freq", "0", "--output", str(out)])
        assert json.loads((out / "config.json").read_text())["bf16"] is native  # resumed as recorded
        assert "emulates" not in capsys.readouterr().err
    # An explicit --bf16 wins, and on a CPU that emulates bfloat16 says what it costs, in one line.
    her_ddpg.main([*TINY, "--epochs", "1", "--save-freq", "0", "--bf16", "--output", str(tmp_path / "on")])
    assert json.loads((tmp_path / "on" / "config.json").read_text())["bf16"] is True
    err = [line for line in capsys.readouterr().err.splitlines() if "emulates" in line]
    assert err == ["her_ddpg.py: note: this run computes in bfloat16, which this CPU emulates (no AVX-512 BF16 "
                   "or AMX): an update takes ~16x its float32 time here; a new run's default here is --no-bf16"]  # fmt: skip


def test_a_checkpoint_whose_settings_are_not_a_mapping_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """A manifest whose meta ``config`` is not a mapping (edited, damaged) is refused in one line naming
    config.json and the checkpoint, not a TypeError from reading which settings it predates."""
    out = tmp_path / "run"
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(out)])
    manifest_path = _checkpoint(out) / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["meta"]["config"] = 5
    manifest_path.write_text(json.dumps(manifest))
    line = fails(capsys, her_ddpg.main, ["--resume", str(out), "--epochs", "2", "--no-gif"])
    assert "differs from its checkpoint's settings" in line
