"""resolve_task_class: each way a task.class can be wrong gets its own message."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from samzapy.config import ConfigError, resolve_task_class
from samzapy.task import StreamTask

_COUNTER = itertools.count()
TASK_MODULE = """
from samzapy.task import StreamTask

class Counter(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass

    class Inner(StreamTask):
        def process(self, envelope, collector, coordinator):
            pass

class NotATask:
    pass

def function():
    pass
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a module with a unique name under tmp_path, importable; returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(source: str) -> str:
        name = f"taskmod_{next(_COUNTER)}"
        (tmp_path / f"{name}.py").write_text(source)
        return name

    yield make
    for name in [n for n in sys.modules if n.startswith("taskmod_")]:
        del sys.modules[name]


def resolve_error(spec: str) -> str:
    with pytest.raises(ConfigError) as info:
        resolve_task_class(spec, "job.properties:2")
    [problem] = info.value.problems
    assert problem.startswith(f"'task.class' = '{spec}' (job.properties:2): ")
    return problem


@pytest.mark.parametrize("form", ["{m}:Counter", "{m}.Counter"])
def test_resolves_colon_and_dotted_forms(module, form: str) -> None:
    name = module(TASK_MODULE)
    cls = resolve_task_class(form.format(m=name), "job.properties:2")
    assert cls.__name__ == "Counter" and issubclass(cls, StreamTask)


def test_resolves_nested_class_after_colon(module) -> None:
    name = module(TASK_MODULE)
    assert resolve_task_class(f"{name}:Counter.Inner", "x:1").__qualname__ == "Counter.Inner"


def test_module_not_found() -> None:
    problem = resolve_error("no_such_module_xyz:Task")
    assert "module 'no_such_module_xyz' not found" in problem


def test_package_of_module_not_found() -> None:
    assert "module 'no_such_pkg.jobs' not found" in resolve_error("no_such_pkg.jobs.Task")


def test_module_that_raises_while_importing(module) -> None:
    name = module("import json\nraise ValueError('bad setting')\n")
    problem = resolve_error(f"{name}:Task")
    assert f"importing module '{name}' raised ValueError: bad setting" in problem
    assert f"{name}.py:2" in problem


def test_module_whose_own_import_is_missing_is_not_reported_as_not_found(module) -> None:
    name = module("import some_missing_dependency_xyz\n")
    problem = resolve_error(f"{name}:Task")
    assert f"importing module '{name}' raised ModuleNotFoundError" in problem
    assert "some_missing_dependency_xyz" in problem


def test_no_such_attribute(module) -> None:
    name = module(TASK_MODULE)
    assert f"module '{name}' has no attribute 'Countr'" in resolve_error(f"{name}:Countr")


def test_attribute_that_is_not_a_class(module) -> None:
    name = module(TASK_MODULE)
    assert "'function' is a function, not a class" in resolve_error(f"{name}:function")


def test_class_not_deriving_from_stream_task(module) -> None:
    name = module(TASK_MODULE)
    assert "class 'NotATask' does not derive from samzapy.StreamTask" in resolve_error(f"{name}:NotATask")


@pytest.mark.parametrize("spec", ["justaname", "module:", ":Class"])
def test_malformed_spec(spec: str) -> None:
    assert "must be module:Class or package.module.Class" in resolve_error(spec)


def test_errors_carry_the_file_in_the_heading() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_task_class("no_such_module_xyz:Task", "config/job.properties:2")
    assert str(info.value).startswith("1 problem in config/job.properties:")


def test_no_such_attribute_suggests_the_closest_name(module) -> None:
    name = module(TASK_MODULE)
    assert resolve_error(f"{name}:Countr").endswith(
        f"module '{name}' has no attribute 'Countr'; did you mean 'Counter'?"
    )


def test_no_such_attribute_lists_the_task_classes_when_nothing_is_close(module) -> None:
    name = module(TASK_MODULE)
    assert resolve_error(f"{name}:Zzz").endswith("has no attribute 'Zzz'; its task classes: Counter")


def _unique(tmp_path: Path, folder: str) -> tuple[str, Path]:
    name = f"taskmod_{next(_COUNTER)}"
    where = tmp_path / folder
    where.mkdir()
    (where / f"{name}.py").write_text(TASK_MODULE)
    return name, where


@pytest.fixture
def clean_path(monkeypatch: pytest.MonkeyPatch):
    """Undo what resolving puts on sys.path and in sys.modules."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in [n for n in sys.modules if n.startswith("taskmod_")]:
        del sys.modules[name]


def test_a_module_next_to_the_properties_file_is_found(tmp_path: Path, clean_path, monkeypatch) -> None:
    name, jobdir = _unique(tmp_path, "job")
    (jobdir / "job.properties").write_text(f"task.class={name}:Counter\n")
    monkeypatch.chdir(tmp_path)  # not the job's folder
    cls = resolve_task_class(f"{name}:Counter", f"{jobdir / 'job.properties'}:1")
    assert cls.__module__ == name and sys.path[0] == str(jobdir)


def test_a_module_in_the_working_directory_is_found(tmp_path: Path, clean_path, monkeypatch) -> None:
    name, cwd = _unique(tmp_path, "cwd")
    monkeypatch.chdir(cwd)
    assert resolve_task_class(f"{name}:Counter", "/elsewhere/job.properties:1").__name__ == "Counter"


def test_a_module_nowhere_names_the_places_looked_in(tmp_path: Path, clean_path, monkeypatch) -> None:
    (tmp_path / "job.properties").write_text("task.class=nowhere_xyz:Task\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        resolve_task_class("nowhere_xyz:Task", f"{tmp_path / 'job.properties'}:1")
    where = f"{tmp_path / 'job.properties'}:1"
    assert info.value.problems == [
        f"'task.class' = 'nowhere_xyz:Task' ({where}): module 'nowhere_xyz' not found "
        f"on sys.path nor in {tmp_path}: put nowhere_xyz.py next to the properties file, or install its "
        f"package, or add its directory to PYTHONPATH"
    ]
