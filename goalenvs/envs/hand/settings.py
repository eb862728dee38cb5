"""The Shadow Hand tasks' defaults and validated settings.

:class:`HandReachSettings` checks every argument of a HandReach env once and fills in Gymnasium-Robotics'
``HandReach-v3`` defaults; :class:`HandManipulateSettings` does the same for the in-hand manipulation
tasks (``HandManipulate*-v1``: block, egg, pen). Nothing here touches MuJoCo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from goalenvs._util import check_bool, check_int, check_real

__all__ = [
    "DEFAULT_SIZE",
    "FINGERTIP_SITES",
    "MEETING_OFFSET",
    "MEETING_SCALE",
    "MEETING_SPACING",
    "REACH_INITIAL_QPOS",
    "RETURN_PROBABILITY",
    "REWARD_TYPES",
    "HandReachSettings",
    "HandManipulateSettings",
    "INITIAL_POSITION_SCALE",
    "MANIPULATE_OBJECTS",
    "ManipulateObject",
    "OBJECTS",
    "ON_PALM_HEIGHT",
    "SETTLE_STEPS",
    "TARGET_POSITIONS",
    "TARGET_POSITION_RANGE",
    "TARGET_ROTATIONS",
    "TOUCH_OBS",
]

DEFAULT_SIZE = 480  # rendered frame width and height
REWARD_TYPES = ("sparse", "dense")

#: The fingertip sites whose positions are the achieved goal: first finger, middle, ring, little, thumb.
FINGERTIP_SITES = ("robot0:S_fftip", "robot0:S_mftip", "robot0:S_rftip", "robot0:S_lftip", "robot0:S_thtip")
#: Where the thumb and one finger meet, relative to the palm (m), before the random jitter.
MEETING_OFFSET = (0.0, -0.09, 0.05)
MEETING_SCALE = 0.005  # standard deviation (m) of the meeting point's jitter
MEETING_SPACING = 0.005  # each of the two tips stops this far short of the meeting point (m)
RETURN_PROBABILITY = 0.1  # the goal is the start fingertips instead, with this probability

#: The start joint angles (rad) of every HandReach episode, Gymnasium-Robotics' v3 values.
REACH_INITIAL_QPOS: Mapping[str, float] = {
    "robot0:WRJ1": -0.16514339750464327,
    "robot0:WRJ0": -0.31973286565062153,
    "robot0:FFJ3": 0.14340512546557435,
    "robot0:FFJ2": 0.32028208333591573,
    "robot0:FFJ1": 0.7126053607727917,
    "robot0:FFJ0": 0.6705281001412586,
    "robot0:MFJ3": 0.000246444303701037,
    "robot0:MFJ2": 0.3152655251085491,
    "robot0:MFJ1": 0.7659800313729842,
    "robot0:MFJ0": 0.7323156897425923,
    "robot0:RFJ3": 0.00038520700007378114,
    "robot0:RFJ2": 0.36743546201985233,
    "robot0:RFJ1": 0.7119514095008576,
    "robot0:RFJ0": 0.6699446327514138,
    "robot0:LFJ4": 0.0525442258033891,
    "robot0:LFJ3": -0.13615534724474673,
    "robot0:LFJ2": 0.39872030433433003,
    "robot0:LFJ1": 0.7415570009679252,
    "robot0:LFJ0": 0.704096378652974,
    "robot0:THJ4": 0.003673823825070126,
    "robot0:THJ3": 0.5506291436028695,
    "robot0:THJ2": -0.014515151997119306,
    "robot0:THJ1": -0.0015229223564485414,
    "robot0:THJ0": -0.7894883021600622,
}


def _hand_checks(settings: Any, default_qpos: Mapping[str, Any]) -> dict[str, Any]:
    """The settings every hand task shares, checked: ``initial_qpos`` (None: ``default_qpos``),
    ``n_substeps``, ``relative_control``, ``max_steps`` (None: never truncated), ``width``, ``height``."""
    qpos = default_qpos if settings.initial_qpos is None else settings.initial_qpos
    if not isinstance(qpos, Mapping):
        raise TypeError(f"initial_qpos must be a dict of joint name -> value(s), got {type(qpos).__name__}")
    max_steps = settings.max_steps
    return {
        "n_substeps": check_int("n_substeps", settings.n_substeps, 1),
        "relative_control": check_bool("relative_control", settings.relative_control),
        "initial_qpos": qpos,
        "max_steps": None if max_steps is None else check_int("max_steps", max_steps, 1),
        "width": check_int("width", settings.width, 1),
        "height": check_int("height", settings.height, 1),
    }


@dataclass(frozen=True)
class HandReachSettings:
    """Every argument of a HandReach env, validated, with the defaults filled in: written once.

    ``HandReachEnv(...)`` passes its arguments into one of these (and its attributes read it); a bad
    value fails here with a one-line error naming it. See ``HandReachEnv`` for what each one means.
    """

    reward_type: str = "sparse"
    _: KW_ONLY
    distance_threshold: float = 0.01
    n_substeps: int = 20
    relative_control: bool = False
    initial_qpos: Mapping[str, Any] = None  # type: ignore[assignment]  # None -> REACH_INITIAL_QPOS
    max_steps: int | None = 50
    width: int = DEFAULT_SIZE
    height: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        if self.reward_type not in REWARD_TYPES:
            raise ValueError(f"reward_type must be one of {list(REWARD_TYPES)}, got {self.reward_type!r}")
        checked = {
            "distance_threshold": check_real("distance_threshold", self.distance_threshold, 0.0, strict=True),
            **_hand_checks(self, REACH_INITIAL_QPOS),
        }
        for name, value in checked.items():  # a frozen dataclass: set through object.__setattr__
            object.__setattr__(self, name, value)


# ---- the in-hand manipulation tasks (Gymnasium-Robotics' HandManipulate*-v1) ---------------------------

OBJECTS = ("block", "egg", "pen")
TARGET_POSITIONS = ("ignore", "fixed", "random")
TARGET_ROTATIONS = ("ignore", "fixed", "z", "parallel", "xyz")
TOUCH_OBS = (None, "boolean", "sensordata", "log")
#: The goal position's offset range (m) from the object's settled start, per axis: [(low, high)] * 3.
TARGET_POSITION_RANGE = ((-0.04, 0.04), (-0.06, 0.02), (0.0, 0.06))
INITIAL_POSITION_SCALE = 0.005  # standard deviation (m) of the object's start position jitter
SETTLE_STEPS = 10  # zero-action env steps that let the object settle at every reset
ON_PALM_HEIGHT = 0.04  # a start is redrawn until the object's centre is above this height (m)


@dataclass(frozen=True)
class ManipulateObject:
    """What differs between the block, the egg and the pen: the MJCF files and three defaults."""

    xml: str
    touch_xml: str
    distance_threshold: float
    randomize_initial_rotation: bool
    ignore_z_target_rotation: bool


MANIPULATE_OBJECTS: Mapping[str, ManipulateObject] = {
    "block": ManipulateObject(
        "manipulate_block.xml", "manipulate_block_touch_sensors.xml", 0.01, True, False
    ),
    "egg": ManipulateObject("manipulate_egg.xml", "manipulate_egg_touch_sensors.xml", 0.01, True, False),
    # The pen is symmetric about its axis: its default ignores the rotation about z, starts unrotated
    # and has a looser position threshold (Gymnasium-Robotics' MujocoHandPenEnv).
    "pen": ManipulateObject("manipulate_pen.xml", "manipulate_pen_touch_sensors.xml", 0.05, False, True),
}


def _one_of(name: str, value: Any, accepted: tuple[Any, ...]) -> Any:
    if value not in accepted or isinstance(value, bool):
        raise ValueError(f"{name} must be one of {list(accepted)}, got {value!r}")
    return value


@dataclass(frozen=True)
class HandManipulateSettings:
    """Every argument of a HandManipulate env, validated, with the defaults filled in: written once.

    ``None`` for ``distance_threshold``, ``randomize_initial_rotation`` and ``ignore_z_target_rotation``
    takes the object's default (:data:`MANIPULATE_OBJECTS`). A bad value fails here with a one-line
    error naming it. See ``HandManipulateEnv`` for what each one means.
    """

    object: str = "block"
    reward_type: str = "sparse"
    _: KW_ONLY
    target_position: str = "random"
    target_rotation: str = "xyz"
    randomize_initial_position: bool = True
    randomize_initial_rotation: bool | None = None
    distance_threshold: float | None = None
    rotation_threshold: float = 0.1
    ignore_z_target_rotation: bool | None = None
    touch_get_obs: str | None = None
    n_substeps: int = 20
    relative_control: bool = False
    initial_qpos: Mapping[str, Any] = None  # type: ignore[assignment]  # None -> {} (the model's own)
    max_steps: int | None = 100
    width: int = DEFAULT_SIZE
    height: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        obj = MANIPULATE_OBJECTS[_one_of("object", self.object, OBJECTS)]
        rotate = self.randomize_initial_rotation
        ignore_z = self.ignore_z_target_rotation
        threshold = obj.distance_threshold if self.distance_threshold is None else self.distance_threshold
        checked = {
            "reward_type": _one_of("reward_type", self.reward_type, REWARD_TYPES),
            "target_position": _one_of("target_position", self.target_position, TARGET_POSITIONS),
            "target_rotation": _one_of("target_rotation", self.target_rotation, TARGET_ROTATIONS),
            "randomize_initial_position": check_bool(
                "randomize_initial_position", self.randomize_initial_position
            ),
            "randomize_initial_rotation": obj.randomize_initial_rotation
            if rotate is None
            else check_bool("randomize_initial_rotation", rotate),
            "distance_threshold": check_real("distance_threshold", threshold, 0.0, strict=True),
            "rotation_threshold": check_real("rotation_threshold", self.rotation_threshold, 0.0, strict=True),
            "ignore_z_target_rotation": obj.ignore_z_target_rotation
            if ignore_z is None
            else check_bool("ignore_z_target_rotation", ignore_z),
            "touch_get_obs": _one_of("touch_get_obs", self.touch_get_obs, TOUCH_OBS),
            **_hand_checks(self, {}),
        }
        for name, value in checked.items():  # a frozen dataclass: set through object.__setattr__
            object.__setattr__(self, name, value)

    @property
    def model_file(self) -> str:
        """The object's MJCF file (its touch-sensor model when the observation has touch values)."""
        obj = MANIPULATE_OBJECTS[self.object]
        return obj.xml if self.touch_get_obs is None else obj.touch_xml
