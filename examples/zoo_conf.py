"""The hyperparameters of ``examples/train.py``: read as the RL Zoo's ``--conf-file``, checked key by key.

A ``--conf-file`` is what the RL Zoo takes: a module holding ``hyperparams`` (``goalenvs.zoo.<algo>``,
the default), a ``.py`` file defining it, or a YAML file; each maps env ids to the RL Zoo's keys. Every
key is checked before a run writes anything: a number against its range, a word, list or mapping
against what the algorithm takes; a mistake is one :class:`RunError` line naming the file, the entry
and the key. Values are plain Python values: the strings the RL Zoo ``eval``s (``"dict(...)"``) are
not evaluated here, but refused in one line (only ``replay_buffer_class`` names our buffer by a string).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runfolder import Range, RunError, check_settings, load_conf  # examples/runfolder.py
from stable_baselines3.common.utils import LinearSchedule

from goalenvs.zoo import HER_BUFFER
from her import HerReplayBuffer

STRATEGIES = ("future", "final", "episode")
CONF_ACCEPTED = (
    "a module holding `hyperparams` (e.g. goalenvs.zoo.tqc), or a .py or .yml file of env ids -> settings"
)
HER_BUFFER_ACCEPTED = "her.HerReplayBuffer (this script always trains with it)"
_HER_BUFFER_FORMS = ("HerReplayBuffer", "her.HerReplayBuffer", HER_BUFFER)
_MAPPINGS = {  # keys whose value is a mapping (the RL Zoo also evals a string; this script does not)
    "policy_kwargs": "a mapping, e.g. {'net_arch': [64, 64]} (a value such as nn.ReLU: in a .py file or module)",
    "replay_buffer_kwargs": "a mapping, e.g. {'n_sampled_goal': 4}",
    "env_kwargs": "a mapping of the env's arguments",
}


def load_hyperparams(conf: str, option: str) -> tuple[str, dict[str, Any]]:
    """``(name, entries)`` of a ``--conf-file`` as the RL Zoo reads it; the entries are a copy (the RL Zoo
    and stable-baselines3 change the dicts they are given)."""
    name, namespace = conf, dict[str, Any]()
    if conf.endswith((".yml", ".yaml", ".py")):
        path = Path(conf)
        with contextlib.suppress(ValueError):  # else its path as given
            name = str(path.resolve().relative_to(Path.cwd()))
        if not path.is_file():
            raise RunError(f"{option}: {conf} is not a file; accepted: {CONF_ACCEPTED}")
        if path.suffix != ".py":
            return name, load_conf(path, option)
    try:
        if conf.endswith(".py"):  # run, as the RL Zoo does
            exec(compile(Path(conf).read_bytes(), conf, "exec"), namespace)
        else:
            namespace = vars(importlib.import_module(conf))
    except Exception as exc:  # whatever the file or module raises
        raise RunError(
            f"{option}: cannot load {name} ({describe_error(exc)}); accepted: {CONF_ACCEPTED}"
        ) from None
    entries = namespace.get("hyperparams")
    if not isinstance(entries, dict):
        raise RunError(
            f"{option}: {name} holds no `hyperparams` mapping of env ids to settings; accepted: {CONF_ACCEPTED}"
        )
    return name, copy.deepcopy(entries)


def evaluate_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A checked hyperparameter entry (:func:`check_hyperparams`) with the RL Zoo's ``"lin_<value>"``
    learning rate as the schedule it names (from <value> down to 0 at the last step)."""
    params = dict(entry)
    if isinstance(params.get("learning_rate"), str):
        params["learning_rate"] = LinearSchedule(float(params["learning_rate"][4:]), 0.0, 1.0)
    return params


# The accepted values of every numeric or boolean key of a hyperparameter entry (the RL Zoo's keys that
# the stable-baselines3 and sb3-contrib algorithms take), checked before anything is written: a typo
# (gamma 5, a negative learning rate) is one line naming the file and key, not a failure mid-run.
_UNIT = Range(float, 0.0, 1.0)
_POSITIVE = Range(float, 0.0, low_open=True)
HYPERPARAM_RANGES: dict[str, Range | type] = {
    **{key: Range(int, 1) for key in ("n_timesteps", "n_envs", "buffer_size", "batch_size", "train_freq",
                                      "target_update_interval", "policy_delay", "n_steps", "stats_window_size")},
    "learning_starts": Range(int, 0),
    "gradient_steps": Range(int, -1),  # -1: as many gradient steps as env steps in the rollout
    "sde_sample_freq": Range(int, -1),  # -1: only at the start of a rollout
    "top_quantiles_to_drop_per_net": Range(int, 0),
    "gamma": _UNIT,
    "tau": Range(float, 0.0, 1.0, low_open=True),  # 0 would never move the target networks
    "exploration_fraction": _UNIT,
    "exploration_initial_eps": _UNIT,
    "exploration_final_eps": _UNIT,
    "learning_rate": _POSITIVE,  # or "lin_<number>"
    "ent_coef": _POSITIVE,  # or "auto", "auto_<number>"
    "target_entropy": Range(float),  # or "auto"
    "max_grad_norm": _POSITIVE,
    "noise_std": Range(float, 0.0),
    "target_policy_noise": Range(float, 0.0),
    "target_noise_clip": Range(float, 0.0),
    **dict.fromkeys(("use_sde", "use_sde_at_warmup", "optimize_memory_usage"), bool),
}  # fmt: skip
HER_RANGES = {"n_sampled_goal": Range(int, 0)}
# Keys this script reads itself; the others go to the algorithm's constructor (those it sets itself excepted).
OWN_KEYS = ("n_timesteps", "n_envs", "env_kwargs", "normalize", "noise_std", "noise_type")
SET_HERE = ("env", "seed", "device", "verbose", "_init_setup_model", "action_noise")


def describe_error(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first if len(first) <= 300 else first[:297] + '...'}"


def not_accepted(where: str, key: str, value: Any, accepted: str) -> RunError:
    return RunError(f"{where} {key}: {value!r} is not accepted; accepted: {accepted}")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _check_strings(params: Mapping[str, Any], where: str) -> None:
    """The keys that take a word or a list besides a number: learning_rate, ent_coef, target_entropy, train_freq."""
    lr = params.get("learning_rate")
    if isinstance(lr, str) and not (lr.startswith("lin_") and _POSITIVE.accepts(_number(lr[4:]))):
        raise not_accepted(where, "learning_rate", lr, 'a number > 0, or "lin_<number > 0>" (decayed to 0)')
    ent = params.get("ent_coef")
    if isinstance(ent, str) and not (
        ent == "auto" or (ent.startswith("auto_") and _POSITIVE.accepts(_number(ent[5:])))
    ):
        raise not_accepted(where, "ent_coef", ent, 'a number > 0, "auto" or "auto_<initial value > 0>"')
    if isinstance(params.get("target_entropy"), str) and params["target_entropy"] != "auto":
        raise not_accepted(where, "target_entropy", params["target_entropy"], 'a finite number or "auto"')
    freq = params.get("train_freq")
    if isinstance(freq, (list, tuple)) and not (
        len(freq) == 2 and Range(int, 1).accepts(freq[0]) and freq[1] in ("step", "episode")
    ):
        raise not_accepted(
            where, "train_freq", freq, 'an integer >= 1, or [integer >= 1, "step" or "episode"]'
        )
    if "noise_type" in params and params["noise_type"] != "normal":
        raise not_accepted(where, "noise_type", params["noise_type"], '"normal" (with noise_std)')
    if "policy" in params and not isinstance(params["policy"], str):
        raise not_accepted(where, "policy", params["policy"], "a policy name such as 'MultiInputPolicy'")


def check_her_settings(values: Mapping[str, Any], where: str) -> None:
    """HER's settings (replay_buffer_kwargs, --strategy/--n-sampled-goal overrides)."""
    strategy = values.get("goal_selection_strategy", "future")
    if strategy not in STRATEGIES:
        raise not_accepted(where, "goal_selection_strategy", strategy, f"one of {list(STRATEGIES)}")
    check_settings(values, HER_RANGES, where)


def check_hyperparams(entry: Mapping[str, Any], algo: str, algo_class: type, where: str) -> dict[str, Any]:
    """``entry`` checked key by key (a :class:`RunError` naming ``where``, e.g. ``"argument --conf-file:
    dqn.yml, entry 'goalenvs/BitFlip-v0', key"``); returned with whole floats of integer keys as ints."""
    accepted = set(inspect.signature(algo_class).parameters) - {"self", *SET_HERE}
    accepted |= set(OWN_KEYS)
    unknown = sorted(set(entry) - accepted)
    if unknown:
        raise RunError(
            f"{where} {unknown[0]}: not a setting of {algo.upper()}+HER; accepted: {sorted(accepted)}"
        )
    params = dict(entry)
    for key, value in params.items():
        spec = HYPERPARAM_RANGES.get(key)
        if isinstance(spec, Range) and spec.kind is int and isinstance(value, float) and value.is_integer():
            params[key] = int(value)
    _check_strings(params, where)
    words = ("learning_rate", "ent_coef", "target_entropy")
    check_settings(
        {k: v for k, v in params.items() if not (k in words and isinstance(v, str))
         and not (k == "train_freq" and isinstance(v, (list, tuple)))},
        HYPERPARAM_RANGES, where,
    )  # fmt: skip
    for key, form in _MAPPINGS.items():
        if params.get(key) is not None and not isinstance(params[key], dict):
            raise not_accepted(where, key, params[key], form)
    if params.get("replay_buffer_kwargs"):
        check_her_settings(
            params["replay_buffer_kwargs"], f"{where.removesuffix(', key')}, replay_buffer_kwargs key"
        )
    buffer = params.get("replay_buffer_class")
    if buffer not in (None, HerReplayBuffer, *_HER_BUFFER_FORMS):
        raise not_accepted(where, "replay_buffer_class", buffer, HER_BUFFER_ACCEPTED)
    if buffer is HerReplayBuffer:  # a .py file's class: run.json keeps its name
        params["replay_buffer_class"] = "her.HerReplayBuffer"
    if "normalize" in params and not isinstance(params["normalize"], (bool, dict)):
        raise not_accepted(
            where, "normalize", params["normalize"], "true, false or a mapping of VecNormalize's arguments"
        )
    return params
