"""The suite's own tooling: what counts as an end-to-end process, the shared free
ports, and the durations report."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.ports import free_port
from tests.suite import is_end_to_end, may_skip_in_ci
from tests.tools.durations import by_fixture, by_module, read_cases, summary


def test_servers_jobs_and_tools_are_end_to_end_but_snippets_and_utilities_are_not() -> None:
    for command in (["python", "-m", "spate.api.cli", "serve"],
                    ["/usr/bin/python3.11", "-m", "moto.server", "-p", "5000"],
                    ["/bin/sh", "-c", "exec bwrap --unshare-pid -- java"],
                    ["spark-class", "org.apache.spark.deploy.master.Master"],
                    ["terraform", "apply"], ["/opt/tansu", "broker"],
                    ["python", "driver.py"]):
        assert is_end_to_end(command), command
    for command in (["python", "-c", "import spate"], ["python", "-S", "-c", "print(1)"],
                    ["python", "-m", "tests.statestore.workers", "commit"],
                    ["file", "-b", "/bin/sh"], ["gcc", "-lfdb_c"], ["sleep", "1"]):
        assert not is_end_to_end(command), command


def test_free_ports_are_free_and_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    for port in ports[:3]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_held_port_is_skipped() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        assert all(free_port() != taken for _ in range(5))


REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.api.test_a" name="test_one" time="2.5">
  <properties><property name="fixture_s:server" value="2.0"/>
  <property name="started" value="python -m spate.api.cli serve"/></properties>
</testcase>
<testcase classname="tests.api.test_a" name="test_two" time="1.0"/>
<testcase classname="tests.engine.test_b" name="test_three" time="4.0">
  <properties><property name="fixture_s:spark" value="3.5"/></properties>
</testcase>
<testcase classname="tests.engine.test_b" name="test_four" time="0.0">
  <skipped message="benchmark"/>
</testcase>
</testsuite></testsuites>
"""


def test_durations_rank_modules_and_fixtures(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    cases = read_cases(report)
    assert by_module(cases) == [("tests/engine/test_b.py", 4.0, 2),
                                ("tests/api/test_a.py", 3.5, 2)]
    assert by_fixture(cases) == [("spark", 3.5, 1), ("server", 2.0, 1)]
    text = summary(cases, top=5)
    assert text.startswith("4 tests, 0.1 min of test time (1 skipped)")
    assert "| tests/engine/test_b.py | 4.0 | 2 |" in summary(cases, top=5, markdown=True)


def test_only_foundationdb_terraform_providers_and_benchmarks_may_skip_in_ci() -> None:
    class Item:
        def __init__(self, benchmark: bool) -> None:
            self.benchmark = benchmark

        def get_closest_marker(self, name: str) -> object | None:
            return object() if name == "benchmark" and self.benchmark else None

    plain, bench = Item(False), Item(True)
    assert may_skip_in_ci(plain, "SPATE_FDB_CLUSTER_FILE is not set: no cluster")  # type: ignore[arg-type]
    assert may_skip_in_ci(bench, "benchmark: set SPATE_BENCHMARK=1")  # type: ignore[arg-type]
    assert not may_skip_in_ci(plain, "RabbitMQ streams do not answer")  # type: ignore[arg-type]
    assert not may_skip_in_ci(plain, "cannot sandbox here: no bwrap")  # type: ignore[arg-type]
