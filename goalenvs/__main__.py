"""``python -m goalenvs ...`` runs the ``goalenvs`` command line (see :mod:`goalenvs.cli`)."""

from goalenvs.cli import main

raise SystemExit(main())
