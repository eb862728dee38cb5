"""What a crash-safe checkpoint costs: ``python -m benchmarks.checkpoint_cost [--transitions N]``.

A FetchPush-sized ``HerStorage`` (1M capacity, 16 envs, 800k transitions by default: a 20-epoch
``examples/her_ddpg.py`` run) is saved as ``examples/runfolder.py`` saves a checkpoint (pickle to a
file in a temporary folder, fsync, SHA-256, manifest, one rename) and as the script saved it before
(pickle to a temporary file, rename; no fsync, no hash). Prints the median of ``--repeat`` saves of
each and the median time to verify the checkpoint on load. Disk-bound: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)
from her import HerStorage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from runfolder import RunFolder


def filled_storage(transitions: int, n_envs: int = 16) -> HerStorage:
    env = gym.make("goalenvs/FetchPush-v0").unwrapped
    space = env.observation_space
    storage = HerStorage(1_000_000, space, env.action_space, None, n_envs=n_envs, seed=0)
    rng = np.random.default_rng(0)
    for step in range(transitions // n_envs):
        obs = {k: rng.standard_normal((n_envs, *space[k].shape)).astype(np.float32) for k in space}
        done = np.full(n_envs, step % 50 == 49)
        actions = rng.uniform(-1, 1, (n_envs, 4)).astype(np.float32)
        storage.add(obs, actions, -np.ones(n_envs, np.float32), np.zeros(n_envs, bool), done, None, obs)
    return storage


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint_cost", description=__doc__)
    parser.add_argument("--transitions", type=int, default=800_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    storage = filled_storage(args.transitions)
    size = len(pickle.dumps(storage, protocol=5))
    new, old, verify = [], [], []
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        folder = RunFolder.create(Path(tmp) / "run", force=False, outputs=[], script="bench")
        for i in range(args.repeat):
            t0 = time.perf_counter()
            folder.save_checkpoint(
                i + 1, {"storage.pkl": lambda p: p.write_bytes(pickle.dumps(storage, protocol=5))}, {}
            )
            t1 = time.perf_counter()
            folder.latest_checkpoint()
            t2 = time.perf_counter()
            with open(Path(tmp) / "old.pkl.tmp", "wb") as f:
                pickle.dump(storage, f, protocol=5)
            os.replace(Path(tmp) / "old.pkl.tmp", Path(tmp) / "old.pkl")
            t3 = time.perf_counter()
            new.append(t1 - t0)
            verify.append(t2 - t1)
            old.append(t3 - t2)
        folder.close()
    med = statistics.median
    print(f"storage of {storage.num_transitions} transitions: {size / 1e6:.0f} MB pickled")
    print(
        f"checkpoint (fsync, SHA-256, one rename): {med(new):.2f} s; before (rename only): {med(old):.2f} s; "
        f"verify on load: {med(verify):.2f} s (medians of {args.repeat})"
    )


if __name__ == "__main__":
    main()
