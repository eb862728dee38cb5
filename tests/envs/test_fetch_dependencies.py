"""Without the fetch extra's packages, making a Fetch env says what to install (simulated in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = (
    'install the fetch extra: `pip install "goalenvs[fetch]"` (goalenvs is not on PyPI yet: from the clone'
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize(
    ("missing", "error", "phrase"),
    [
        (
            "mujoco",
            "ModuleNotFoundError",
            "the Fetch and Shadow Hand tasks need MuJoCo, which is not installed; ",
        ),
        (
            "gymnasium_robotics",
            "DependencyNotInstalled",
            "the Fetch tasks use the MJCF assets shipped with gymnasium-robotics, which is not installed; ",
        ),
    ],
)
def test_make_says_what_to_install(missing: str, error: str, phrase: str) -> None:
    code = (
        f"import sys; sys.modules[{missing!r}] = None  # as if it were not installed\n"
        "import gymnasium as gym, goalenvs\n"
        "try:\n"
        "    gym.make('goalenvs/FetchPush-v0')\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err, sep=': ')\n"
    )
    out = _run(code).stdout.strip()
    assert out.startswith(f"{error}: {phrase}{INSTALL}"), out
    assert "`pip install mujoco gymnasium-robotics`" in out


def test_cli_check_without_mujoco_is_one_line_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "from goalenvs.cli import main\n"
        "sys.exit(main(['check', 'goalenvs/FetchReach-v0']))\n"
    )
    result = _run(code)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert 'pip install "goalenvs[fetch]"' in result.stderr


def test_other_envs_work_without_mujoco() -> None:
    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "import gymnasium as gym, goalenvs\n"
        "gym.make('goalenvs/BitFlip-v0').reset(seed=0); gym.make('goalenvs/Parking-v0').reset(seed=0)\n"
        "print('ok', 'mujoco' in sys.modules and sys.modules['mujoco'] is not None)\n"
    )
    assert _run(code).stdout.strip() == "ok False"
