"""The cluster backends are found by their names: one declaration, no list to keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.scheduler.backends import backend_classes, create_backend
from spate.scheduler.backends.local import LocalBackend
from spate.scheduler.config import BACKENDS, SchedulerConfig
from spate.scheduler.errors import ConfigurationError


def test_every_backend_name_has_its_class_and_no_class_is_unnamed() -> None:
    classes = backend_classes()
    assert sorted(classes) == sorted(BACKENDS)
    assert all(cls.name == name for name, cls in classes.items())


def test_a_subclass_of_a_backend_does_not_replace_it() -> None:
    class Instrumented(LocalBackend):  # inherits the name "local", declares none
        pass

    assert backend_classes()["local"] is LocalBackend


def test_the_configured_backend_is_created(tmp_path: Path) -> None:
    backend = create_backend(SchedulerConfig(data_dir=tmp_path).resolved())
    assert isinstance(backend, LocalBackend)


def test_an_unknown_backend_is_refused_with_the_names_there_are(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown cluster backend 'nomad'; use one of "
                                                 "local, standalone, kubernetes"):
        SchedulerConfig(data_dir=tmp_path, cluster_backend="nomad")  # type: ignore[arg-type]
    # A config that skipped its checks still gets the same answer when a backend is made.
    config = SchedulerConfig(data_dir=tmp_path)
    object.__setattr__(config, "cluster_backend", "nomad")
    with pytest.raises(ConfigurationError, match="unknown cluster backend 'nomad'"):
        create_backend(config)
