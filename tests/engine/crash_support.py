"""Running ``spate run`` as a process a test can SIGKILL, and reading what it committed.

The connector crash tests start a job from a folder holding ``pipeline.sql``
(state in ``state.db``, Spark's checkpoint in ``checkpoint/``), kill its whole
process group mid-stream and start it again at another parallelism.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spate.statestore import open_store

REPO = Path(__file__).resolve().parents[3]
#: ``<tenant>/<pipeline>`` of the job ``spate run`` starts for ``pipeline.sql``.
OWNER = ("default", "pipeline")


def spate_run(workdir: Path, parallelism: int) -> subprocess.Popen[bytes]:
    """``spate run`` of ``workdir/pipeline.sql`` in a process group of its own."""
    env = dict(os.environ, SPATE_LOG="WARNING")
    return subprocess.Popen(
        [sys.executable, "-m", "spate.api.cli", "run", str(workdir / "pipeline.sql"),
         "--parallelism", str(parallelism), "--state", f"sqlite:///{workdir / 'state.db'}",
         "--checkpoint", str(workdir / "checkpoint"), "--epoch-max-delay-ms", "250"],
        cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def committed(workdir: Path) -> tuple[int | None, bool]:
    """The job's last committed epoch (None: none yet) and whether it finished."""
    if not (workdir / "state.db").exists():
        return None, False
    with open_store(f"sqlite:///{workdir / 'state.db'}") as store:
        state = store.pipeline(*OWNER)
        last: int | None = state.last_committed_epoch()
        return last, bool(last is not None and state.epoch_metadata().get("finished"))


def last_committed(workdir: Path) -> int | None:
    """The job's last committed epoch (None: none yet)."""
    return committed(workdir)[0]
