"""``python -m spate.api.cli``: the ``spate`` command."""

from spate.api.cli import main

main()
