"""her_ddpg.py's workers on torch.distributed, launched with the real ``torchrun`` (gloo, on localhost).

Shares, resume of a distributed run bit for bit, the same result from one node x 2 workers and from two
nodes x 1 worker, a refused world size, and a killed worker stopping the others.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import her_ddpg  # noqa: E402
import workers  # noqa: E402

from tests.examples.folder_checks import fails  # noqa: E402

SCRIPT = str(EXAMPLES / "her_ddpg.py")
PREFIX = "her_ddpg.py: error: "
# Seconds of work: 4 envs (2 per worker), 3 cycles of 2 updates of batch 32 (16 per worker).
TINY = ["--env", "goalenvs/FetchReach-v0", "--n-envs", "4", "--n-cycles", "3", "--n-batches", "2",
        "--batch-size", "32", "--hidden", "16", "--layers", "2", "--buffer-size", "4000",
        "--eval-episodes", "5", "--save-freq", "1", "--no-gif"]  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}

# Every test here runs torchrun workers that train: the slow tier (CI runs it).
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(args: list[str], workers: int = 2, nodes: int = 1, node_rank: int = 0, port: int | None = None,
             wait: bool = True, restarts: int = 0) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:  # fmt: skip
    """``torchrun`` of her_ddpg.py: one node (``--standalone``) or node ``node_rank`` of ``nodes``."""
    if nodes == 1:
        launch = ["--standalone", "--nproc-per-node", str(workers), "--max-restarts", str(restarts)]
    else:
        launch = ["--nnodes", str(nodes), "--node-rank", str(node_rank), "--nproc-per-node", str(workers),
                  "--master-addr", "127.0.0.1", "--master-port", str(port)]  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", *launch, SCRIPT, *args]
    if not wait:
        return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)


def _ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


def _state(out: Path) -> tuple[dict, list[float], dict[str, bytes]]:
    """The last checkpoint's networks and optimisers, the curve, and every worker's storage and envs."""
    (last,) = sorted(p for p in (out / "checkpoints").iterdir() if p.name.isdigit())[-1:]
    state = torch.load(last / "agent.pt", weights_only=False)
    with (out / "eval.csv").open() as f:
        success = [float(r["success_rate"]) for r in csv.DictReader(f)]
    files = {p.name: pickle.loads(p.read_bytes()) for p in last.iterdir() if p.suffix == ".pkl"}
    return state["agent"], success, files


def _same_workers(a: dict, b: dict) -> None:
    """Every worker's storage (its transitions, and what it samples next), envs and random states alike."""
    from goalenvs.envs.fetch import FetchEnv

    assert sorted(a) == sorted(b)
    for name in a:
        if name.startswith("storage"):
            assert a[name].num_transitions == b[name].num_transitions > 0
            a[name].reward_fn = b[name].reward_fn = FetchEnv(task="reach").compute_reward
            sa, sb = a[name].sample_arrays(64), b[name].sample_arrays(64)
            assert np.array_equal(sa["actions"], sb["actions"])
            assert np.array_equal(sa["observations"]["observation"], sb["observations"]["observation"])
        else:
            assert a[name]["rng"] == b[name]["rng"]
            assert np.array_equal(a[name]["torch_rng"], b[name]["torch_rng"])
            assert [r.bit_generator.state for r in a[name]["envs"]] == [
                r.bit_generator.state for r in b[name]["envs"]
            ]


def _same_agent(a: dict, b: dict) -> None:
    for net in ("actor", "critic", "actor_target", "critic_target"):
        for key in a[net]:
            assert torch.equal(a[net][key], b[net][key]), (net, key)
    for opt in ("actor_opt", "critic_opt"):
        for i, s in a[opt]["state"].items():
            assert torch.equal(s["exp_avg"], b[opt]["state"][i]["exp_avg"])


@pytest.fixture(scope="module")
def two_worker_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 2 epochs by 2 workers, with its TensorBoard events in ``tb/whole_1`` beside it."""
    out = tmp_path_factory.mktemp("dist") / "whole"
    tensorboard = ["--tensorboard", str(out.parent / "tb")] if importlib.util.find_spec("tensorboard") else []
    _ok(torchrun([*TINY, "--epochs", "2", "--output", str(out), *tensorboard]))
    return out


def _tensorboard(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """The scalar series of a TensorBoard folder, as TensorBoard shows them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


# ------------------------------------------------------------------------------ shares


def test_shares_partition_the_envs_batch_and_buffer() -> None:
    for size in (1, 2, 3, 5):
        envs = [workers.share(16, rank, size) for rank in range(size)]
        assert envs[0][0] == 0 and envs[-1][1] == 16
        assert all(a[1] == b[0] for a, b in zip(envs, envs[1:], strict=False))  # contiguous
        assert max(hi - lo for lo, hi in envs) - min(hi - lo for lo, hi in envs) <= 1  # even
        assert sum(workers.part(2048, lo, hi, 16) for lo, hi in envs) == 2048
        assert sum(workers.part(1_000_000, lo, hi, 16) for lo, hi in envs) == 1_000_000
    assert workers.share(16, 0, 1) == (0, 16)  # one worker: everything


def test_a_lost_worker_seen_by_an_overlapped_gradient_sum_ends_in_the_same_one_line(capsys) -> None:
    """A lost worker reaches the others as a DistError or, from gloo's transport (a blocking all_reduce or
    an overlapped gradient sum's ``Work.wait``), as a plain RuntimeError: both end in the one line and exit
    status 1; the run's own errors pass."""
    run = workers.Run("her_ddpg.py", (), her_ddpg.Config, her_ddpg.CONF_FILE, (), ())
    agent = her_ddpg.Agent(her_ddpg.Config(hidden=8, layers=1), obs_dim=5, goal_dim=3, act_dim=4)
    gloo = ("[/x/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:26304: Connection "
            "reset by peer. This is typically caused by a remote worker hanging or bugs in the application.")  # fmt: skip

    class LostPeer:  # what all_reduce(..., async_op=True) returns when the other worker has died
        def wait(self) -> bool:
            raise RuntimeError(gloo)

    def fails_with(text: str) -> None:
        raise RuntimeError(text)

    with pytest.raises(SystemExit) as stopped:
        run.session(lambda: agent.step(agent.critic_opt, LostPeer()))
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert (
        "another worker stopped or cannot be reached (Read error [127.0.0.1]:26304: Connection reset by peer.)"
        in err
    )
    with pytest.raises(RuntimeError, match="an error of the run's own"):
        run.session(lambda: fails_with("an error of the run's own"))


def test_more_workers_than_envs_is_refused_before_anything_is_written(tmp_path) -> None:
    out = tmp_path / "run"
    result = torchrun([*TINY, "--n-envs", "2", "--output", str(out)], workers=3)
    assert result.returncode != 0 and not out.exists()
    ours = [line for line in result.stderr.splitlines() if line.startswith(PREFIX)]
    assert ours == [
        f"{PREFIX}--n-envs: 2 envs cannot be shared by 3 workers; accepted: n_envs >= 3, or fewer workers"
    ]


# ------------------------------------------------------------------------------ runs under torchrun


def test_two_workers_write_one_checkpoint_and_the_same_networks(two_worker_run) -> None:
    agent, success, files = _state(two_worker_run)
    assert sorted(files) == ["envs-1.pkl", "envs.pkl", "storage-1.pkl", "storage.pkl"]
    assert len(success) == 2
    assert (
        (two_worker_run / "commands.txt")
        .read_text()
        .startswith("torchrun (world size 2) examples/her_ddpg.py")
    )


def test_only_rank_0_writes_tensorboard_and_its_figures_cover_every_worker(two_worker_run) -> None:
    pytest.importorskip("tensorboard")
    tb = two_worker_run.parent / "tb"
    assert [p.name for p in tb.iterdir()] == ["whole_1"]  # one run folder: rank 1 made none
    (events,) = (tb / "whole_1").iterdir()  # and one events file: rank 1 wrote none
    assert events.name.startswith("events.out.tfevents.")
    series = _tensorboard(tb / "whole_1")
    for tag in ("eval/success_rate", "train/critic_loss", "train/q_mean", "rollout/ep_rew_mean"):
        assert [step for step, _ in series[tag]] == [600, 1200], tag  # 4 envs x 3 cycles x 50 steps an epoch
    with (two_worker_run / "eval.csv").open() as f:
        success = [float(r["success_rate"]) for r in csv.DictReader(f)]
    assert [v for _, v in series["eval/success_rate"]] == pytest.approx(success)  # both workers' episodes
    assert [v for _, v in series["train/n_updates"]] == [6, 12]


def test_a_resumed_two_worker_run_is_the_uninterrupted_one_bit_for_bit(two_worker_run, tmp_path) -> None:
    pytest.importorskip("tensorboard")
    out, tb = tmp_path / "split", tmp_path / "tb"
    _ok(torchrun([*TINY, "--epochs", "1", "--output", str(out), "--tensorboard", str(tb)]))
    resumed = torchrun(["--resume", str(out), "--epochs", "2"])
    _ok(resumed)
    assert f"resumed {out} at epoch 1" in resumed.stdout
    whole, split = _state(two_worker_run), _state(out)
    _same_agent(whole[0], split[0])
    assert whole[1] == split[1]
    _same_workers(whole[2], split[2])
    # TensorBoard goes on in the run's folder; the figures summed over the workers are the same, bit for bit.
    a, b = _tensorboard(two_worker_run.parent / "tb" / "whole_1"), _tensorboard(tb / "split_1")
    for tag in ("eval/success_rate", "eval/mean_reward", "rollout/ep_rew_mean", "train/critic_loss",
                "train/actor_loss", "train/q_mean", "train/q_target_mean"):  # fmt: skip
        assert a[tag] == b[tag], tag


def test_a_two_worker_run_is_evaluated_by_one_process_which_writes_nothing(two_worker_run, capsys) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in two_worker_run.iterdir()}
    success = her_ddpg.main(["--resume", str(two_worker_run), "--evaluate", "3"])
    assert 0.0 <= success <= 1.0 and f"{two_worker_run}: success rate" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in two_worker_run.iterdir()} == before


def test_one_node_of_two_workers_equals_two_nodes_of_one(two_worker_run, tmp_path) -> None:
    out = tmp_path / "nodes"
    port = _free_port()
    nodes = [torchrun([*TINY, "--epochs", "2", "--output", str(out)], workers=1, nodes=2, node_rank=r, port=port,
                      wait=False) for r in (0, 1)]  # fmt: skip
    for node in nodes:
        _, err = node.communicate(timeout=300)
        assert node.returncode == 0, err[-3000:]
    one, two = _state(two_worker_run), _state(out)
    _same_agent(one[0], two[0])
    assert one[1] == two[1]
    _same_workers(one[2], two[2])


def test_another_world_size_on_resume_is_one_line(two_worker_run, tmp_path, capsys) -> None:
    line = fails(capsys, her_ddpg.main, ["--resume", str(two_worker_run), "--epochs", "3"])
    assert line == (
        f"{PREFIX}--resume: {two_worker_run} was trained by 2 workers, this launch has 1; accepted: the same "
        "number (torchrun with 2 workers in all, e.g. torchrun --nproc-per-node 2 examples/her_ddpg.py): the "
        "replay storage and envs are split between the workers"
    )
    one = tmp_path / "one"
    her_ddpg.main([*TINY, "--epochs", "1", "--output", str(one)])
    capsys.readouterr()
    result = torchrun(["--resume", str(one), "--epochs", "2"])
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if line.startswith(PREFIX)]
    assert ours == [
        f"{PREFIX}--resume: {one} was trained by 1 worker, this launch has 2; accepted: the same number "
        "(python examples/her_ddpg.py): the replay storage and envs are split between the workers"
    ]


def _workers(launcher: int) -> dict[int, int]:
    """``{rank: pid}`` of the workers a torchrun process started."""
    found = {}
    for child in Path("/proc").iterdir():
        if not child.name.isdigit():
            continue
        try:
            stat = (child / "stat").read_text()
            environ = (child / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != launcher:
            continue
        for item in environ:
            if item.startswith(b"RANK="):
                found[int(item[5:])] = int(child.name)
    return found


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _past_first_checkpoint(
    args: list[str], restarts: int = 0
) -> tuple[subprocess.Popen[str], dict[int, int]]:
    """A 2-worker launch of ``args`` (its ``--output`` last), once its first checkpoint is written, and its
    workers' ``{rank: pid}``."""
    out = Path(args[-1])
    run = torchrun(args, wait=False, restarts=restarts)
    assert isinstance(run, subprocess.Popen)
    deadline = time.monotonic() + 120
    while not (out / "checkpoints").is_dir() or not any(
        p.name.isdigit() for p in (out / "checkpoints").iterdir()
    ):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
        time.sleep(0.2)
    workers = _workers(run.pid)
    assert sorted(workers) == [0, 1]
    return run, workers


def test_a_killed_worker_stops_the_others_within_seconds_and_the_run_resumes(tmp_path) -> None:
    out = tmp_path / "killed"
    run, workers = _past_first_checkpoint([*TINY, "--epochs", "1000", "--output", str(out)])
    os.kill(workers[1], signal.SIGKILL)
    killed = time.monotonic()
    _, err = run.communicate(timeout=60)
    assert time.monotonic() - killed < 15
    assert run.returncode != 0
    for pid in workers.values():  # no worker left behind
        assert not _alive(pid)
    ours = [line for line in err.splitlines() if line.startswith("her_ddpg.py: ")]
    assert len(ours) <= 1, (
        ours
    )  # rank 0's one line (another worker lost, or interrupted), no traceback of ours
    done = max(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    resumed = torchrun(["--resume", str(out), "--epochs", str(done + 1)])
    _ok(resumed)
    assert f"resumed {out} at epoch {done}" in resumed.stdout


def test_a_launcher_killed_with_sigkill_takes_its_workers_with_it(tmp_path) -> None:
    """torchrun starts its workers in sessions of their own: killed with SIGKILL, it cannot stop them, and
    without the parent-death signal they trained on, unseen, holding the folder."""
    out = tmp_path / "orphans"
    run, workers = _past_first_checkpoint([*TINY, "--epochs", "1000", "--output", str(out)])
    run.kill()
    killed = time.monotonic()
    _, err = run.communicate(timeout=60)  # the workers hold the pipes: this waits for them too

    while any(_alive(pid) for pid in workers.values()):
        assert time.monotonic() - killed < 15
        time.sleep(0.1)
    done = max(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    resumed = torchrun(["--resume", str(out), "--epochs", str(done + 1)])  # the folder is free
    _ok(resumed)
    assert f"resumed {out} at epoch {done}" in resumed.stdout


def test_a_worker_whose_launcher_died_before_it_started_stops(tmp_path) -> None:
    """torchrun killed while its workers still import torch: they asked for the parent-death signal too
    late, so each checks that it has a launcher left (else it waited forever for its peers)."""
    ranks = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RESTART_COUNT": "0"}
    env = dict(os.environ, **ranks, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    pid_file = tmp_path / "pid"
    command = f"{sys.executable} {SCRIPT} {' '.join(TINY)} --output {tmp_path / 'run'} & echo $! > {pid_file}"
    subprocess.run(["bash", "-c", command], env=env, check=True)  # bash ends: the worker is an orphan
    pid = int(pid_file.read_text())
    start = time.monotonic()
    while _alive(pid) and time.monotonic() - start < 60:
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "PPid:\t1\n" not in status.read_text():
            os.kill(pid, signal.SIGKILL)
            pytest.skip("a subreaper adopted the orphan (not PID 1): orphaned() cannot tell here")
        time.sleep(0.2)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the orphaned worker was still running after 60 s"


def test_a_diverged_run_of_two_workers_says_so_once(tmp_path) -> None:
    """Both workers hold the same NaN weights and see them at the same step: worker 0 says it, once."""
    argv = [*TINY, "--epochs", "3", "--n-batches", "20", "--lr-actor", "1e30", "--lr-critic", "1e30"]
    result = torchrun([*argv, "--output", str(tmp_path / "out")])
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if line.startswith("her_ddpg.py: ")]
    assert ours == [
        f"{PREFIX}training diverged in epoch 1: the actor's actions are not finite (its weights no longer are); "
        "lower --lr-actor / --lr-critic and start again with --force"
    ]


def test_a_torchrun_restart_replaces_nothing(tmp_path) -> None:
    """--max-restarts runs the launch's own command again (--force included): refused in one line; the
    last checkpoint stays, and --resume goes on from it."""
    out = tmp_path / "restarted"
    run, workers = _past_first_checkpoint(
        [*TINY, "--epochs", "1000", "--force", "--output", str(out)], restarts=1
    )
    os.kill(workers[1], signal.SIGKILL)
    _, err = run.communicate(timeout=120)
    assert run.returncode != 0
    assert (
        f"{PREFIX}torchrun restarted the workers; a restart replaces nothing: go on with --resume"
        in err.splitlines()
    )
    done = max(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    _ok(torchrun(["--resume", str(out), "--epochs", str(done + 1)]))
