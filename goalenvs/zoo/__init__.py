"""Tuned hyperparameters of every goalenvs id, one module per algorithm, for the RL Zoo and ``examples/train.py``.

Each module holds ``hyperparams``: env id -> the RL Zoo's keys, as plain Python values (numbers,
strings, lists, dicts), so that a ``pip install`` brings them and RL Zoo's ``--conf-file`` imports them::

    python -m rl_zoo3.train --algo tqc --env goalenvs/FetchReach-v0 --gym-packages goalenvs --conf-file goalenvs.zoo.tqc

``dqn`` covers BitFlip, ``tqc`` every other id; ``sac`` FetchReach and Parking; ``sac_cpu`` and
``tqc_cpu`` are the CPU-sized Parking and FetchPush runs of docs/training.md. The modules import
nothing beyond this package: the buffer is named by :data:`HER_BUFFER`, a string the RL Zoo evaluates.
"""

from __future__ import annotations

# The RL Zoo ``eval``s a string replay_buffer_class in its own module, where ``her`` is not a name (a
# plain "her.HerReplayBuffer" is a NameError there, even with --gym-packages her): __import__ finds it.
# goalenvs imports nothing of her (tests/test_dependencies.py); examples/train.py reads this string too.
HER_BUFFER = "__import__('her').HerReplayBuffer"
