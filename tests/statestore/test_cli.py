"""``spate state inspect`` and ``spate state gc`` on a real store."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from spate import statestore
from spate.statestore.cli import state


def _store_with_history(url: str) -> None:
    with statestore.open_store(url) as store:
        pipeline = store.pipeline("acme", "clicks")
        for epoch in range(3):
            pipeline.begin_epoch(epoch, [range(0, 128)])
            writer = pipeline.writer(epoch, range(0, 128))
            for group in (1, 2, 3):
                writer.put("window-0", group, ("page", group), b"x" * (10 + epoch))
            writer.put("window-1", 9, ("only",), b"y")
            writer.commit()
            pipeline.commit_epoch(epoch, {"watermark_us": epoch * 1000})


def test_inspect_lists_and_describes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _store_with_history(url)
    runner = CliRunner()
    listed = runner.invoke(state, ["inspect", url])
    assert listed.exit_code == 0 and listed.output == "acme\tclicks\n"
    shown = runner.invoke(state, ["inspect", url, "--tenant", "acme", "--pipeline", "clicks",
                                  "--json"])
    assert shown.exit_code == 0, shown.output
    info = json.loads(shown.output)
    assert info["last_committed_epoch"] == 2
    assert info["metadata"] == {"watermark_us": 2000}
    assert info["operators"] == [
        {"operator": "window-0", "key_groups": 3, "keys": 3, "value_bytes": 36},
        {"operator": "window-1", "key_groups": 1, "keys": 1, "value_bytes": 1}]
    table = runner.invoke(state, ["inspect", url, "--tenant", "acme", "--pipeline", "clicks"])
    assert "window-0" in table.output and "last epoch     2" in table.output


def test_gc_reports_what_it_removed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _store_with_history(url)
    result = CliRunner().invoke(state, ["gc", url, "--tenant", "acme", "--pipeline", "clicks"])
    assert result.exit_code == 0, result.output
    # epochs 0 and 1 are superseded: 3 x (10 + 11) bytes of window-0, 2 x 1 of window-1
    assert result.output == "removed 8 versions (65 bytes)\n"


def test_unknown_pipeline_and_bad_url_are_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _store_with_history(url)
    runner = CliRunner()
    missing = runner.invoke(state, ["inspect", url, "--pipeline", "nope"])
    assert missing.exit_code != 0 and "no pipeline 'nope'" in missing.output
    bad = runner.invoke(state, ["inspect", "mysql://x"])
    assert bad.exit_code == 1 and "unknown state store URL" in bad.output
