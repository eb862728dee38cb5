"""The RL Zoo's hyperparameter files for ``examples/train.py``: read, checked key by key, parsed.

Every key is checked before a run writes anything: a number against its range, a word or list against
what the algorithm takes, a Python-valued string by parsing it (no ``eval``: only the forms of
:data:`PYTHON_FORMS`); a mistake is one :class:`RunError` line naming the file, the entry and the key.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping
from typing import Any

from runfolder import Range, RunError, check_settings  # examples/runfolder.py
from stable_baselines3.common.utils import LinearSchedule
from torch import nn

from her import HerReplayBuffer

STRATEGIES = ("future", "final", "episode")


# The keys whose value may be a Python-valued string. The RL Zoo ``eval``s them; here they are parsed
# (:func:`parse_value`), which accepts only the forms its files use, listed in PYTHON_FORMS.
_PYTHON_VALUED = ("policy_kwargs", "replay_buffer_kwargs", "replay_buffer_class", "normalize")
PYTHON_FORMS = (
    "a number, a string, True, False, None, a list, or dict(key=value, ...) of them, where a value may "
    'also be nn.<torch.nn module>, e.g. "dict(net_arch=[64, 64], activation_fn=nn.ReLU)"'
)
HER_BUFFER_ACCEPTED = "her.HerReplayBuffer (this script always trains with it)"
_HER_BUFFER_FORMS = ("HerReplayBuffer", "her.HerReplayBuffer", "__import__('her').HerReplayBuffer")


def parse_value(text: str) -> Any:
    """A Python-valued string of :data:`PYTHON_FORMS` (or ``HerReplayBuffer`` as the RL Zoo writes it),
    parsed without ``eval``; ``ValueError`` or ``SyntaxError`` for anything else."""
    if " ".join(text.split()) in _HER_BUFFER_FORMS:
        return HerReplayBuffer
    return _parse_node(ast.parse(text.strip(), filename="<string>", mode="eval").body)


def _parse_node(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        number: Any = getattr(node.operand, "value", None)  # a Constant's
        if type(number) in (int, float):
            return -number
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_parse_node(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if len(keys) == len(node.keys):
            return {k.value: _parse_node(v) for k, v in zip(keys, node.values, strict=True)}
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
        and all(k.arg is not None for k in node.keywords)
    ):
        return {k.arg: _parse_node(k.value) for k in node.keywords}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "nn":
        module = getattr(nn, node.attr, None)
        if isinstance(module, type) and issubclass(module, nn.Module):
            return module
    raise ValueError(f"{ast.unparse(node)!r} is none of these forms")


def evaluate_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A hyperparameter entry with its Python-valued strings parsed (checked by :func:`check_hyperparams`)."""
    params = dict(entry)
    for key in _PYTHON_VALUED:
        if isinstance(params.get(key), str):
            params[key] = parse_value(params[key])
    for key in ("learning_rate",):  # the RL Zoo's "lin_<value>": from <value> down to 0 at the last step
        if isinstance(params.get(key), str) and params[key].startswith("lin_"):
            params[key] = LinearSchedule(float(params[key][4:]), 0.0, 1.0)
    return params


# The accepted values of every numeric key of a hyperparameter entry (the RL Zoo's keys that the
# stable-baselines3 and sb3-contrib algorithms take), checked before anything is written: a typo
# (gamma 5, a negative learning rate) is one line naming the file and key, not a failure mid-run.
_UNIT = Range(float, 0.0, 1.0)
_POSITIVE = Range(float, 0.0, low_open=True)
HYPERPARAM_RANGES: dict[str, Range] = {
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
}  # fmt: skip
HER_RANGES = {"n_sampled_goal": Range(int, 0)}
# Keys this script reads itself; the others go to the algorithm's constructor (those it sets itself excepted).
OWN_KEYS = ("n_timesteps", "n_envs", "env_kwargs", "normalize", "noise_std", "noise_type")
SET_HERE = ("env", "seed", "device", "verbose", "_init_setup_model", "action_noise")
BOOLEAN_KEYS = ("use_sde", "use_sde_at_warmup", "optimize_memory_usage")


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
    for key in BOOLEAN_KEYS:
        if key in params and not isinstance(params[key], bool):
            raise not_accepted(where, key, params[key], "true or false")
    if "policy" in params and not isinstance(params["policy"], str):
        raise not_accepted(where, "policy", params["policy"], "a policy name such as 'MultiInputPolicy'")
    if not isinstance(params.get("env_kwargs", {}) or {}, dict):
        raise not_accepted(where, "env_kwargs", params["env_kwargs"], "a mapping of the env's arguments")


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
        if spec is not None and spec.kind is int and isinstance(value, float) and value.is_integer():
            params[key] = int(value)
    _check_strings(params, where)
    words = ("learning_rate", "ent_coef", "target_entropy")
    check_settings(
        {k: v for k, v in params.items() if not (k in words and isinstance(v, str))
         and not (k == "train_freq" and isinstance(v, (list, tuple)))},
        HYPERPARAM_RANGES, where,
    )  # fmt: skip
    for key in _PYTHON_VALUED:  # parsed now, so that a mistake in one is one line before any write
        if key not in params:
            continue
        if isinstance(params[key], str):
            try:
                value = parse_value(params[key])
            except (SyntaxError, ValueError) as exc:
                forms = f"{PYTHON_FORMS} ({describe_error(exc)})"
                forms = HER_BUFFER_ACCEPTED if key == "replay_buffer_class" else forms
                raise not_accepted(where, key, params[key], forms) from None
        else:
            value = params[key]
        if key in ("policy_kwargs", "replay_buffer_kwargs") and not isinstance(value, (dict, type(None))):
            raise not_accepted(where, key, params[key], 'a mapping, e.g. "dict(n_sampled_goal=4)"')
        if key == "replay_buffer_kwargs" and value:
            check_her_settings(value, f"{where.removesuffix(', key')}, replay_buffer_kwargs key")
        if key == "replay_buffer_class" and value not in (None, HerReplayBuffer):
            raise not_accepted(where, key, params[key], HER_BUFFER_ACCEPTED)
        if key == "normalize" and not isinstance(value, (bool, dict)):
            raise not_accepted(where, key, params[key], "true, false or the arguments of VecNormalize")  # fmt: skip
    return params
