"""How the test suite runs: markers that mean what they say, both cores, no silent
skips in CI, and a record of where the time goes.

(PYTEST_DONT_REWRITE: a plugin, imported by ``tests/conftest.py`` before pytest
could rewrite it; it holds no assertions.)

Loaded by ``tests/conftest.py`` (``pytest_plugins``). What it does:

* **``spark``** is applied to every test that uses the ``spark`` fixture, directly or
  through another fixture, so ``-m "not spark"`` never starts a JVM.
* **``e2e``** must be on every test that starts a process (``spate serve``, ``spate
  run``, jobs, clusters, brokers, browsers): a test that starts one without it
  fails, naming the command. ``-m "not e2e"`` is the fast inner loop.
* **Two workers** (pytest-xdist, ``-n auto --dist loadgroup`` in ``pyproject.toml``).
  An ``e2e`` module is one group, so its module-scoped servers start once, on one
  worker; groups are queued first, slowest first (:data:`SLOW_GROUPS`), so the
  long end-to-end runs overlap with the rest of the suite instead of trailing it.
  A run of one module, or with ``-s``, stays in one process.
* **No silent skips in CI**: under ``CI=true`` a skipped test fails with its reason,
  except where :func:`may_skip_in_ci` says the thing cannot exist here.
* **Cheaper JVMs**: every Spark driver the run starts compiles with C1 only and maps
  a class-data archive of Spark (:mod:`tests.jvm`).
* **Timing**: each fixture's set-up time is recorded on the test that paid for it
  (a JUnit property ``fixture_s:<name>``), for ``tests/tools/durations.py``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.jvm import JIT_AND_GC, jvm_options_for_tests

#: The JUnit property prefix ``tests/tools/durations.py`` reads.
FIXTURE_PROPERTY = "fixture_s:"
#: Fixture set-ups shorter than this are not recorded (they would only bloat the report).
FIXTURE_MIN_S = 0.05

#: Groups (``e2e`` modules, by path under ``tests/``) that take longest, slowest first:
#: they are queued before everything else so that no worker starts one near the end.
#: A module not listed is queued after these, before the tests outside any group.
SLOW_GROUPS = (
    "scheduler/test_applications.py",
    "serve",
    "faults",
    "engine/test_crash.py",
    "standalone",
    "engine/test_cli.py",
    "scheduler/test_autoscale_e2e.py",
    "scheduler/test_local.py",
    "api/test_lifecycle.py",
    "engine/job/test_job_stop.py",
)

_TESTS = Path(__file__).resolve().parent

# -- cheaper JVMs --------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Once, in the controlling process (workers inherit its environment): the drivers'
    JVM options and Spark's class-data archive (:mod:`tests.jvm`)."""
    if hasattr(config, "workerinput") or os.environ.get("SPATE_BENCHMARK") == "1":
        return
    with processes_allowed():
        os.environ.setdefault("SPARK_SUBMIT_OPTS", jvm_options_for_tests())
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", JIT_AND_GC)


# -- workers ----------------------------------------------------------------------------


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Two workers for a run of the suite; none (one process) for one module or ``-s``."""
    if config.getoption("capture") == "no":
        return 0
    named = [arg for arg in config.args if not arg.startswith("-")]
    if len(named) == 1 and (named[0].endswith(".py") or "::" in named[0]):
        return 0
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own rule reads it
    return 2


def _group_of(item: pytest.Item) -> str | None:
    """The xdist group of a test: the one it names (``pytest.mark.xdist_group``: modules
    that share a session's server or cluster), else for an ``e2e`` test its module's
    path under ``tests/``; None for the rest, which are spread one by one."""
    named = item.get_closest_marker("xdist_group")
    if named is not None:
        return str(named.args[0] if named.args else named.kwargs.get("name", "default"))
    if item.get_closest_marker("e2e") is None:
        return None
    return Path(str(item.path)).resolve().relative_to(_TESTS).as_posix()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``spark`` users; group ``e2e`` modules and queue them first, slowest first."""
    del config
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and \
                item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
    rank = {group: index for index, group in enumerate(SLOW_GROUPS)}
    groups: dict[int, str | None] = {}
    for item in items:
        group = _group_of(item)
        groups[id(item)] = group
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))

    def order(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = indexed
        group = groups[id(item)]
        if group is None:
            return (len(SLOW_GROUPS) + 1, index)
        return (rank.get(group, len(SLOW_GROUPS)), index)

    items[:] = [item for _, item in sorted(enumerate(items), key=order)]


# -- e2e: a test that starts a process says so ----------------------------------------------


#: Programs that are not a test's processes in the sense of ``e2e``: quick utilities
#: libraries run for a fact (``platform`` runs ``file``, ``ctypes`` runs ``gcc``).
UTILITIES = frozenset({"file", "uname", "ldconfig", "getconf", "id", "git", "nproc", "gcc",
                       "ld", "sleep", "unshare",
                       # what builds a compute unit's network (its processes are the unit's)
                       "ip", "nft",
                       # the sampler a profiled benchmark runs over itself (SPATE_BENCH_PROFILE)
                       "py-spy"})


def is_end_to_end(argv: list[str]) -> bool:
    """Whether a command is a server, job, cluster, browser or tool run (what ``e2e``
    marks), rather than a utility or a Python snippet (``python -c``, ``python -m
    tests.…``) a test runs for a fact or as a helper."""
    if not argv or Path(argv[0]).name in UTILITIES:
        return False
    if Path(argv[0]).name.startswith("python"):
        options = [a for a in argv[1:] if a in ("-S", "-I", "-E", "-B", "-u")]
        rest = argv[1 + len(options):]
        if rest[:1] == ["-c"] or (rest[:1] == ["-m"] and rest[1:2] and
                                  rest[1].startswith("tests.")):
            return False
    return True


class _ProcessWatch:
    """Records the processes started while a test's phase runs."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.allowed = 0

    @contextmanager
    def allowing(self) -> Iterator[None]:
        self.allowed += 1
        try:
            yield
        finally:
            self.allowed -= 1


WATCH = _ProcessWatch()
_original_init = subprocess.Popen.__init__


def _watched_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    argv = args.split() if isinstance(args, str) else [str(a) for a in args]
    if not WATCH.allowed and is_end_to_end(argv):
        WATCH.started.append(" ".join(argv)[:200])
    _original_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _watched_init  # type: ignore[method-assign]


@contextmanager
def processes_allowed() -> Iterator[None]:
    """Processes started inside are not the test's (the shared SparkSession's JVM)."""
    with WATCH.allowing():
        yield


def pytest_collection_finish(session: pytest.Session) -> None:
    """Processes started while collecting (a conftest probing the sandbox) are the
    suite's, not the first test's."""
    del session
    WATCH.started.clear()


# -- the report of each phase: e2e check, CI skips ------------------------------------------

#: Skips that stay skips under CI=true: what cannot exist on this CI machine. No
#: FoundationDB server or client library is installable here, and no Terraform
#: provider either (the registry is out of reach; ``terraform validate`` of infra/
#: needs the AWS, Kubernetes and Helm providers' schemas from a mirror).
MAY_SKIP_IN_CI = ("SPATE_FDB_CLUSTER_FILE is not set", "SPATE_TF_PROVIDER_MIRROR is not set")


def may_skip_in_ci(item: pytest.Item, reason: str) -> bool:
    """Benchmarks (their timings run only with SPATE_BENCHMARK=1), FoundationDB and
    Terraform's providers may skip in CI; nothing else may."""
    return item.get_closest_marker("benchmark") is not None or \
        any(allowed in reason for allowed in MAY_SKIP_IN_CI)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    del call
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    started, WATCH.started = WATCH.started, []
    item.user_properties.extend(("started", command) for command in started)
    if started and item.get_closest_marker("e2e") is None and not report.failed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started a process but is not marked e2e: {started[0]!r}. "
            "Add pytest.mark.e2e to its module (CONTRIBUTING.md, 'Markers').")
    if report.skipped and os.environ.get("CI") == "true" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(
            report.longrepr)
        if not may_skip_in_ci(item, reason):
            report.outcome = "failed"
            report.longrepr = (f"skipped under CI=true, where every test must run: {reason}. "
                               "Make .ci/run install or start what it needs.")


# -- leaks ----------------------------------------------------------------------------------

_CONSOLE = Path(__file__).resolve().parent / "console"
#: The test that ran last on this worker, to name when it left something behind.
_previous: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test at once, naming the culprit, when an earlier test left an asyncio loop
    marked as this thread's running loop (``asyncio.run`` would fail inside it). Only
    the console's tests run beside one (its browser's: tests/console/conftest.py)."""
    leaked = asyncio.events._get_running_loop() is not None
    if leaked and _CONSOLE not in item.path.parents:
        culprit = _previous[-1] if _previous else "an earlier test"
        pytest.fail(f"{culprit} left an asyncio loop running on this thread; clear it in "
                    "the fixture that started it", pytrace=False)
    _previous[:] = [item.nodeid]


# -- timing -------------------------------------------------------------------------------

_current: list[pytest.Item] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    _current.append(item)
    try:
        yield
    finally:
        _current.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Generator[None, None, None]:
    started = time.perf_counter()
    yield
    spent = time.perf_counter() - started
    if _current and spent >= FIXTURE_MIN_S:
        _current[-1].user_properties.append(
            (f"{FIXTURE_PROPERTY}{fixturedef.argname}", round(spent, 3)))
