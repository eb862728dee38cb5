"""One dependency direction, and no private names across modules.

* goalenvs imports nothing of her (her may import goalenvs.core): checked by importing every
  goalenvs module in a fresh interpreter, and by reading every goalenvs source file;
* her imports nothing of goalenvs but goalenvs.core;
* no module of goalenvs or her imports an underscore name from another module (``__future__``,
  dunder names and a module's own names excepted): a name used across modules is public in its home.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import goalenvs

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("goalenvs", "her")

# Underscore names imported across modules that are tolerated: none.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()


def sources(package: str, root: Path = ROOT) -> list[tuple[Path, str]]:
    """``(path, module name)`` of every source file of ``package`` under ``root``."""
    out = []
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out.append((path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)))
    return out


def imports(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """``(module, names, line)`` of every import in ``path`` (relative imports made absolute)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            found.append((base, [alias.name for alias in node.names], node.lineno))
    return found


def goalenvs_modules() -> list[str]:
    """Every module of goalenvs but ``__main__``."""
    return [m.name for m in pkgutil.walk_packages(goalenvs.__path__, "goalenvs.") if "__main__" not in m.name]


def last_json_line(script: str) -> Any:
    """What ``script``, run in a fresh interpreter, printed last, read as JSON."""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_importing_every_goalenvs_module_imports_no_her():
    names = goalenvs_modules()
    script = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as error:  # an optional dependency (mujoco) missing\n"
        "        if 'goalenvs' in str(error.name or ''):\n"
        "            raise\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'her' or m.startswith('her.'))))\n"
    )
    assert last_json_line(script) == []
    assert len(names) > 20  # the walk found the package's modules


def test_every_goalenvs_module_imports_first_without_a_cycle():
    """Each module imported as the first of the package (the others forgotten before each): a cycle
    between two modules only fails the import that comes first, e.g. the MuJoCo families' shared
    task module importing a family's package that imports it back."""
    script = (
        "import importlib, json, sys, warnings\n"
        "warnings.simplefilter('ignore')  # re-imports register the ids again\n"
        "failed = []\n"
        f"for name in {goalenvs_modules()!r}:\n"
        "    for module in [m for m in sys.modules if m == 'goalenvs' or m.startswith('goalenvs.')]:\n"
        "        del sys.modules[module]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as error:  # an optional dependency (mujoco) missing is not a cycle\n"
        "        if 'goalenvs' in str(error.name or '') or 'circular' in str(error):\n"
        "            failed.append(f'{name}: {error}')\n"
        "print(json.dumps(failed))\n"
    )
    assert last_json_line(script) == []


def her_imports(root: Path = ROOT) -> list[str]:
    return [
        f"{path.name}:{line} imports {module}"
        for path, name in sources("goalenvs", root)
        for module, _, line in imports(path, name)
        if module == "her" or module.startswith("her.")
    ]


def test_no_goalenvs_source_imports_her():
    assert her_imports() == []


def test_her_imports_only_goalenvs_core():
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path, name in sources("her")
        for module, _, line in imports(path, name)
        if (module == "goalenvs" or module.startswith("goalenvs.")) and module != "goalenvs.core"
    ]
    assert offenders == []


def private_imports(package: str, root: Path = ROOT) -> set[tuple[str, str, str]]:
    """``(importing module, imported module, name)`` of every underscore name imported across modules."""
    found = set()
    for path, here in sources(package, root):
        for module, names, _ in imports(path, here):
            if module == "__future__" or module == here or not module.startswith(PACKAGES):
                continue
            if module.split(".")[0] not in PACKAGES:
                continue
            for name in names:
                if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                    found.add((here, module, name))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_underscore_name_is_imported_across_modules(package):
    assert private_imports(package) - KNOWN_PRIVATE_IMPORTS == set()


def test_the_scans_see_what_they_look_for(tmp_path):
    # The scans would pass vacuously if they read nothing: a planted package trips each of them.
    (tmp_path / "goalenvs" / "sub").mkdir(parents=True)
    (tmp_path / "goalenvs" / "sub" / "__init__.py").write_text(
        "from ..core import _found\n", encoding="utf-8"
    )
    (tmp_path / "goalenvs" / "mod.py").write_text(
        "from her.storage import HerStorage\nfrom goalenvs.mod import _own\n", encoding="utf-8"
    )
    assert her_imports(tmp_path) == ["mod.py:1 imports her.storage"]
    assert private_imports("goalenvs", tmp_path) == {("goalenvs.sub", "goalenvs.core", "_found")}
