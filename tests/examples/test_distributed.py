"""her_ddpg.py's workers on torch.distributed, launched with the real ``torchrun`` (gloo, on localhost).

Shares, resume of a distributed run bit for bit, the same result from one node x 2 workers and from two
nodes x 1 worker, a refused world size, and a killed worker stopping the others.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import pickle
import re
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

import ddpg_options  # noqa: E402
import her_ddpg  # noqa: E402
from runfolder import RunError  # noqa: E402
from workers import World  # noqa: E402

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
        worlds = [World(rank, size) for rank in range(size)]
        envs = [w.share(16) for w in worlds]
        assert envs[0][0] == 0 and envs[-1][1] == 16
        assert all(a[1] == b[0] for a, b in zip(envs, envs[1:], strict=False))  # contiguous
        assert max(hi - lo for lo, hi in envs) - min(hi - lo for lo, hi in envs) <= 1  # even
        assert sum(her_ddpg.part(2048, lo, hi, 16) for lo, hi in envs) == 2048
        assert sum(her_ddpg.part(1_000_000, lo, hi, 16) for lo, hi in envs) == 1_000_000
    assert World(0, 1).share(16) == (0, 16)  # one worker: everything, as before workers existed


# One worker of test_sums_in_flight_at_once_are_exact_on_every_worker: two sums started before either is
# waited for (as the updates overlap the critic's and the actor's), waited in the other order.
SUMS = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from workers import World
world = World.from_env()
r = world.rank
a = torch.arange(100_000, dtype=torch.float32) * (r + 1) / 7
b = torch.full((3,), 0.1 * (r + 1), dtype=torch.float64)
wait_a = world.start_sum(a)
wait_b = world.start_sum(b, torch.empty_like(b))
assert wait_b() is b and wait_a() is a
print(a.numpy().tobytes().hex()[:64], a[-1].item(), b.tolist(), flush=True)
world.close()
"""


@pytest.mark.parametrize("size", [2, 3, 4])
def test_sums_in_flight_at_once_are_exact_on_every_worker(size: int) -> None:
    port = _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SUMS, str(EXAMPLES)],
            env={
                **ENV,
                "RANK": str(r),
                "WORLD_SIZE": str(size),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "LOCAL_RANK": str(r),
                "LOCAL_WORLD_SIZE": str(size),
            },  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for r in range(size)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    lines = {out.strip() for out, _ in outs}
    assert len(lines) == 1  # the same bits on every worker
    (line,) = lines
    expected = torch.arange(100_000, dtype=torch.float32)[-1].item() * sum(range(1, size + 1)) / 7
    assert float(line.split()[1]) == pytest.approx(expected, rel=1e-6)
    assert [float(v) for v in line.split("[")[1].rstrip("]").split(",")] == pytest.approx(
        [0.1 * size * (size + 1) / 2] * 3
    )


def test_a_world_that_torchrun_did_not_describe_is_one_line(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(
        RunError, match="^WORLD_SIZE='two' / RANK=.* are not integers; start workers with torchrun"
    ):
        World.from_env()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(RunError, match="^RANK=2 WORLD_SIZE=2 do not describe a worker"):
        World.from_env()
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    assert World.from_env() == World(0, 1)


@pytest.mark.parametrize(
    "gloo",
    [
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:538] Connection closed by peer [127.0.0.1]:5777. This is "
        "typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error.",
        "[../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 300000ms for recv operation to complete. "
        "This is typically caused by a remote worker hanging or bugs in the application. Check the logs of the "
        "remote worker before reporting an error.\nException raised from ...",
    ],
)
def test_gloo_errors_shrink_to_what_happened(gloo: str) -> None:
    from workers import _first_line

    line = _first_line(RuntimeError(gloo))
    assert line in (
        "Connection closed by peer [127.0.0.1]:5777.",
        "Timed out waiting 300000ms for recv operation to complete.",
    )


@pytest.mark.parametrize("rank", [0, 1])
def test_workers_of_other_versions_stop_before_anything_is_written(monkeypatch, rank: int) -> None:
    import torch.distributed as dist
    import workers

    ours = workers.software()
    theirs = {**ours, "torch": "2.12.0", "mujoco": "3.1.0"}

    def gather(box: list, mine: object) -> None:  # what the two machines would send
        box[:] = [("node-a", ours), ("node-b", theirs)]

    monkeypatch.setattr(dist, "all_gather_object", gather)
    if rank > 0:
        with pytest.raises(SystemExit) as stopped:  # worker 0 says why
            World(rank, 2)._check_alike()
        assert stopped.value.code == 2
        return
    with pytest.raises(RunError) as refused:
        World(rank, 2)._check_alike()
    versions = ", ".join(f"{k} {v}" for k, v in ours.items())
    assert str(refused.value) == (
        f"the workers run other versions than worker 0 on node-a ({versions}): worker 1 on node-b: torch 2.12.0, "
        "mujoco 3.1.0; accepted: the same versions on every machine of the run"
    )
    monkeypatch.setattr(
        dist, "all_gather_object", lambda box, mine: box.__setitem__(slice(None), [mine, mine])
    )
    World(rank, 2)._check_alike()  # alike: nothing to say


@pytest.mark.parametrize(("most", "done", "then"), [
    ("3", "1", "torchrun restarts the workers (restart 2 of 3): they go on from the last checkpoint"),
    ("3", "3", "Resume the run from its last checkpoint with the same launch and --resume"),
    (None, None, "Resume the run from its last checkpoint with the same launch and --resume"),
])  # fmt: skip
def test_a_lost_workers_line_says_how_the_run_goes_on(monkeypatch, most, done, then) -> None:
    import workers

    for name, value in (("TORCHELASTIC_MAX_RESTARTS", most), ("TORCHELASTIC_RESTART_COUNT", done)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    with pytest.raises(workers.WorkerLost) as lost, World(1, 2)._comm("summing"):
        raise RuntimeError("[pair.cc:538] Connection closed by peer [127.0.0.1]:5777")
    assert str(lost.value) == (
        "worker 1 of 2: another worker stopped or cannot be reached while summing (Connection closed by peer "
        f"[127.0.0.1]:5777); this worker stops too. {then}"
    )


def test_more_workers_than_envs_is_refused_before_anything_is_written(tmp_path) -> None:
    out = tmp_path / "run"
    with pytest.raises(RunError) as exc:
        ddpg_options.parse_args([*TINY, "--output", str(out)], World(0, 5), her_ddpg.Config)
    assert str(exc.value) == (
        "--n-envs: 4 envs cannot be shared by 5 workers; accepted: n_envs >= the number of workers (5), or "
        "fewer workers"
    )
    with pytest.raises(RunError, match="^--evaluate: runs in one process, not under torchrun"):
        ddpg_options.parse_args(["--resume", str(out), "--evaluate", "5"], World(0, 2), her_ddpg.Config)
    assert not out.exists()


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
    without ``stop_with_launcher`` they trained on, unseen, holding the folder."""
    out = tmp_path / "orphans"
    run, workers = _past_first_checkpoint([*TINY, "--epochs", "1000", "--output", str(out)])
    run.kill()
    killed = time.monotonic()
    _, err = run.communicate(timeout=60)  # the workers hold the pipes: this waits for them too

    while any(_alive(pid) for pid in workers.values()):
        assert time.monotonic() - killed < 15
        time.sleep(0.1)
    ours = [line for line in err.splitlines() if line.startswith("her_ddpg.py: ")]
    assert ours and ours[0].startswith("her_ddpg.py: interrupted at epoch "), err[-3000:]
    assert len(ours) <= 2, ours  # rank 0's line, and at most worker 1's that it lost worker 0
    done = max(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    resumed = torchrun(["--resume", str(out), "--epochs", str(done + 1)])  # the folder is free
    _ok(resumed)
    assert f"resumed {out} at epoch {done}" in resumed.stdout


def test_torchrun_restarts_go_on_from_the_last_checkpoint_bit_for_bit(tmp_path) -> None:
    """--max-restarts: after a worker dies torchrun runs the same command again, --force included; the
    restart goes on from the launch's last checkpoint and ends where the uninterrupted run ends."""
    out, whole = tmp_path / "restarted", tmp_path / "whole"
    argv = [*TINY, "--epochs", "12", "--force"]
    run, workers = _past_first_checkpoint([*argv, "--output", str(out)], restarts=1)
    os.kill(workers[1], signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=240)
    assert run.returncode == 0, stderr[-3000:]
    # Rank 0's one line: it lost worker 1, so torchrun restarts them; or torchrun stopped it first (SIGTERM).
    ours = [line for line in stderr.splitlines() if line.startswith("her_ddpg.py: ")]
    lost = "this worker stops too. torchrun restarts the workers (restart 1 of 1): they go on from the last checkpoint"
    assert len(ours) == 1 and (
        ours[0].endswith(lost) or ours[0].startswith("her_ddpg.py: interrupted at epoch ")
    ), ours
    assert re.search(
        rf"resumed {re.escape(str(out))} at epoch \d+ \(torchrun restarted the workers: restart 1\)", stdout
    )
    _ok(torchrun([*argv, "--output", str(whole)]))
    agent, success, files = _state(out)
    agent_whole, success_whole, files_whole = _state(whole)
    assert success == success_whole and len(success) == 12  # each epoch once
    _same_agent(agent, agent_whole)
    _same_workers(files, files_whole)


@pytest.mark.parametrize("blocked", [False, True], ids=["acts-on-sigterm", "blocked-in-c"])
def test_a_worker_whose_launcher_is_gone_stops_even_when_blocked(tmp_path, blocked: bool) -> None:
    """``stop_with_launcher``: SIGTERM once the parent is gone; SIGKILL after the grace for a worker that cannot
    act on it (here SIGTERM is blocked in its main thread, as a wait inside C++ would leave it pending)."""
    child = (
        "import signal, sys, time; sys.path.insert(0, sys.argv[1]); import workers\n"
        "workers.stop_with_launcher(grace_s=1.0)\n"
        + ("signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n" if blocked else "")
        + "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    launcher = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]], start_new_session=True)\n"
        "print(p.pid, flush=True)\ntime.sleep(60)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", launcher, child, str(EXAMPLES)], stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    pid = int(run.stdout.readline())
    assert run.stdout.readline().strip() == "ready"  # the child inherited the pipe
    run.kill()
    run.wait()
    killed = time.monotonic()
    while _alive(pid):
        assert time.monotonic() - killed < 8, "the worker outlived its launcher"
        time.sleep(0.05)
    assert time.monotonic() - killed >= (1.0 if blocked else 0.0)  # the blocked one waited for the grace


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


def test_workers_are_pinned_to_cores_of_their_own_only_where_they_fit(monkeypatch) -> None:
    import workers

    allowed = sorted(os.sched_getaffinity(0))
    pinned: list[set[int]] = []
    monkeypatch.setattr(workers.os, "sched_setaffinity", lambda pid, cores: pinned.append(set(cores)))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert workers.pin(1) is None  # not under torchrun: left alone
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(len(allowed)))
    monkeypatch.setenv("LOCAL_RANK", str(len(allowed) - 1))
    assert workers.pin(1) == {allowed[-1]} and pinned == [{allowed[-1]}]
    assert workers.pin(2) is None  # 2 cores each do not fit: left alone
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(len(allowed) + 1))
    assert workers.pin(1) is None and len(pinned) == 1


def test_env_threads_are_read_before_the_workers_meet() -> None:
    assert ddpg_options.env_threads_option(["--env-threads", "3"]) == 3
    assert ddpg_options.env_threads_option(["--env-threads=2", "--seed", "1"]) == 2
    assert ddpg_options.env_threads_option(["--env-threads", "x"]) == 1  # parse_args says what is wrong
    assert ddpg_options.env_threads_option([]) == 1
    # a worker is pinned to as many cores as it runs threads of either kind
    assert ddpg_options.cores_each(["--threads", "2", "--env-threads", "1"]) == 2
    assert ddpg_options.cores_each(["--env-threads", "3", "--threads=2"]) == 3
