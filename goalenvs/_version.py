"""The version of goalenvs, in one place: ``pyproject.toml`` reads it from here when the package is built."""

__version__ = "0.1.0"
