"""A num_envs whose arrays cannot fit in memory is refused at once, in one line (issue 45).

``gym.make_vec("goalenvs/BitFlip-v0", num_envs=10**8)`` used to run for a minute (or swap) with no word
about memory; now the native vector envs compare an estimate of their arrays with the memory available
before allocating anything.
"""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

from goalenvs.core import available_memory
from tests.conftest import make_params

FAMILIES = [
    p
    for p in make_params()
    if p.values[0] in ("goalenvs/BitFlip-v0", "goalenvs/Parking-v0", "goalenvs/FetchPush-v0")
]
HUGE = 10**12  # beyond any machine's memory at a few hundred bytes per env

needs_meminfo = pytest.mark.skipif(
    available_memory() is None, reason="the available memory cannot be told here"
)


@needs_meminfo
@pytest.mark.parametrize("env_id", FAMILIES)
def test_a_num_envs_beyond_memory_is_refused_in_one_line_within_a_second(env_id: str) -> None:
    start = time.perf_counter()
    with pytest.raises(
        MemoryError, match=rf"num_envs={HUGE}\) needs at least .* bytes per env.*available.*lower num_envs"
    ) as err:
        gym.make_vec(env_id, num_envs=HUGE)
    assert time.perf_counter() - start < 2.0
    assert isinstance(err.value, ValueError) and "\n" not in str(err.value)


@needs_meminfo
def test_the_refusal_says_how_many_envs_fit_and_that_many_are_accepted() -> None:
    with pytest.raises(MemoryError, match=r"at most about ([\d,]+) fit") as err:
        gym.make_vec("goalenvs/BitFlip-v0", num_envs=HUGE)
    fit = int(err.value.args[0].split("at most about ")[1].split(" fit")[0].replace(",", ""))
    assert fit > 1000
    vec = gym.make_vec("goalenvs/BitFlip-v0", num_envs=1000)  # a normal num_envs is untouched
    vec.reset(seed=0)
    vec.close()


@needs_meminfo
def test_a_num_envs_numpy_would_allocate_lazily_but_memory_cannot_hold_is_refused_too() -> None:
    """The issue's case: 100 bytes per env of the memory available is an array numpy maps lazily (no
    MemoryError of its own), and it used to run for a minute before swapping or being killed."""
    num_envs = available_memory() // 100
    start = time.perf_counter()
    with pytest.raises(MemoryError, match=rf"BitFlipVectorEnv\(num_envs={num_envs}\) needs at least"):
        gym.make_vec("goalenvs/BitFlip-v0", num_envs=num_envs)
    assert time.perf_counter() - start < 2.0
