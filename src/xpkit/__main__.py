"""``python -m xpkit``: the same as the ``xpkit`` command."""

from ._cli import main

raise SystemExit(main())
