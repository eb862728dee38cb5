"""TQC + HER (sb3-contrib) on every continuous-action id: ``--conf-file goalenvs.zoo.tqc``.

The RL Zoo's values (rl_zoo3 2.9.2 hyperparams/tqc.yml: parking-v0, FetchReach-v1, FetchPush-v1 and
friends) with our buffer; each Dense id takes its sparse twin's entry (not tuned apart). The RL Zoo
has no hand settings: HandReach, the HandManipulate ids and their Dense twins take the Fetch object
tasks' values, not tuned for the hand (the HER report, Plappert et al. 2018, trained the hand with the Fetch settings). Long on a
CPU (docs/training.md); ``tqc_cpu`` is FetchPush sized for one.
"""

from __future__ import annotations

from typing import Any

from goalenvs.registration import MANIPULATE_VARIANTS
from goalenvs.zoo import HER_BUFFER, sac

_FETCH_OBJECT: dict[str, Any] = {  # Push, Slide, PickAndPlace
    "n_timesteps": 1_000_000,
    "policy": "MultiInputPolicy",
    "buffer_size": 1_000_000,
    "batch_size": 2048,
    "gamma": 0.95,
    "learning_rate": 1e-3,
    "tau": 0.05,
    "replay_buffer_class": HER_BUFFER,
    "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
    "policy_kwargs": {"net_arch": [512, 512, 512], "n_critics": 2},
}
# SAC's entries (the RL Zoo gives both algorithms the same values) with TQC's critics.
_FETCH_REACH = {**sac.FETCH_REACH, "policy_kwargs": {"net_arch": [64, 64], "n_critics": 1}}
_FETCH: dict[str, dict[str, Any]] = {
    "FetchReach": _FETCH_REACH,
    "FetchPush": _FETCH_OBJECT,
    "FetchSlide": {**_FETCH_OBJECT, "n_timesteps": 3_000_000},
    "FetchPickAndPlace": _FETCH_OBJECT,
}

hyperparams: dict[str, dict[str, Any]] = {
    "goalenvs/Parking-v0": {**sac.PARKING, "policy_kwargs": {"net_arch": [512, 512, 512], "n_critics": 2}},
    **{f"goalenvs/{task}{dense}-v0": entry for task, entry in _FETCH.items() for dense in ("", "Dense")},
    # Not tuned for the hand: the Fetch object tasks' values (see the module docstring).
    **{f"goalenvs/HandReach{dense}-v0": _FETCH_OBJECT for dense in ("", "Dense")},
    **{
        f"goalenvs/HandManipulate{variant[0]}{dense}-v0": _FETCH_OBJECT
        for variant in MANIPULATE_VARIANTS
        for dense in ("", "Dense")
    },
}
