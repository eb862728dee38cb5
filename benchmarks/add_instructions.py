"""Instructions per HER ``add``, ours against stable-baselines3's, counted by valgrind's callgrind.

CPython's time per call moves with the machine's load; the instructions it executes do not. This
script fills a Fetch-sized buffer (bench_her's steps: one env, 50-step episodes) past its capacity,
so the ring wraps, then adds ``N`` more steps. Run it twice under callgrind, with ``N`` = 0 and 10,000:
the difference of the two counts over 10,000 is one ``add``::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python -m benchmarks.add_instructions ours 0
    valgrind --tool=callgrind --callgrind-out-file=/dev/null python -m benchmarks.add_instructions ours 10000

(``ours``: ``HerStorage.add``; ``adapter``: our stable-baselines3 ``HerReplayBuffer.add``; ``sb3``:
stable-baselines3's own.) Each run prints nothing; callgrind's ``Collected`` line is the count.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.bench_her import FetchSizedEnv, episode_block, make_vec_env

CAPACITY = 5_000


def main(which: str, n: int) -> None:
    calls = episode_block(40)
    if which == "ours":
        from her import HerStorage

        env = FetchSizedEnv()
        storage = HerStorage(CAPACITY, env.observation_space, env.action_space, env.compute_reward)
        add = storage.add
        no_flags = np.zeros(1, bool)
        # stable-baselines3's arguments as HerStorage's: obs, action, reward, terminated, truncated, infos, next obs
        calls = [(o, a, r, no_flags, np.asarray(d), None, nxt) for o, nxt, a, r, d, _ in calls]
    elif which in ("adapter", "sb3"):
        if which == "sb3":
            from stable_baselines3 import HerReplayBuffer
        else:
            from her import HerReplayBuffer
        vec_env = make_vec_env()
        buffer = HerReplayBuffer(CAPACITY, vec_env.observation_space, vec_env.action_space, env=vec_env)
        add = buffer.add
    else:
        raise SystemExit(
            f"usage: python -m benchmarks.add_instructions {{ours,adapter,sb3}} N; got {which!r}"
        )
    for i in range(CAPACITY + 1_000 + n):  # past the capacity first: the ring wraps
        add(*calls[i % len(calls)])


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
