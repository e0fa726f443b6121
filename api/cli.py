"""The ``spate`` command line: one group, with each package's commands mounted."""

from __future__ import annotations

import logging
import os

import click

from spate.api.clientcli import keys, pipelines
from spate.api.dbcli import db
from spate.api.serve import serve
from spate.api.worker import worker
from spate.engine.cli import run
from spate.statestore.cli import state


@click.group()
@click.option("--verbose", "-v", is_flag=True, help="Log more.")
def main(verbose: bool) -> None:
    """Spate: streaming SQL on Spark with exactly-once state."""
    level = logging.DEBUG if verbose else getattr(logging, os.environ.get("SPATE_LOG", "WARNING"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")


main.add_command(run)
main.add_command(state)
main.add_command(db)
main.add_command(pipelines)
main.add_command(keys)
main.add_command(serve)
main.add_command(worker)


if __name__ == "__main__":
    main()
