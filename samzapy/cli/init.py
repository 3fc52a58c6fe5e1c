"""``samzapy init NAME [--pipeline]``: a new project that runs and passes its own test as written.

The files come from ``samzapy/cli/templates/`` (package data, so an installed wheel has them).
``project/``: a task module, its ``.properties`` on the embedded broker, a pytest test with the
harness fixture, ``conftest.py``, sample input and a README saying how to test and run it.
``pipeline/`` (``--pipeline``): ``app.py`` (a pipeline, docs/pipelines.md), a test with
:class:`~samzapy.pipeline.testing.PipelineHarness`, ``conftest.py``, sample input and a README.

The task project stays the default: docs/first-job.md walks through it step by step and
scripts already call ``samzapy init NAME`` for it; ``--pipeline`` is one flag away and the
README of each template names the other.
"""

from __future__ import annotations

import keyword
import re
import sys
from importlib import resources
from pathlib import Path
from string import Template

import click

from samzapy.cli.boundary import Command

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: template file -> file written (``$module``, ``$properties`` and ``$test_file`` substituted)
TASK_FILES = {
    "job.py.tmpl": "${module}.py",
    "job.properties.tmpl": "${properties}",
    "test_job.py.tmpl": "${test_file}",
    "conftest.py.tmpl": "conftest.py",
    "sample-input.jsonl.tmpl": "sample-input.jsonl",
    "README.md.tmpl": "README.md",
}
#: the same for ``--pipeline`` (``samzapy/cli/templates/pipeline/``)
PIPELINE_FILES = {
    "app.py.tmpl": "app.py",
    "test_app.py.tmpl": "${test_file}",
    "conftest.py.tmpl": "conftest.py",
    "sample-input.jsonl.tmpl": "sample-input.jsonl",
    "README.md.tmpl": "README.md",
}


def module_name(name: str) -> str:
    """The Python module of project ``name``: lower case, ``-`` as ``_``.

    >>> module_name("Click-Count")
    'click_count'
    """
    return name.lower().replace("-", "_")


def check_name(name: str) -> None:
    """Refuse a name that is no job name or whose module would shadow another one.

    Raises:
        click.BadParameter: what is wrong with ``name`` and what would do.
    """
    if not _NAME.fullmatch(name):
        msg = f"'{name}' is not a project name: use a letter, then letters, digits, '-' or '_'"
        raise click.BadParameter(msg, param_hint="NAME")
    module = module_name(name)
    if keyword.iskeyword(module) or module in sys.stdlib_module_names or module == "samzapy":
        msg = f"'{name}' would make a module '{module}' hiding Python's or samzapy's own: choose another name"
        raise click.BadParameter(msg, param_hint="NAME")


def write_project(name: str, target: Path, *, pipeline: bool = False) -> list[Path]:
    """Write project ``name`` into the new or empty directory ``target``; the files written.

    A task project, or with ``pipeline`` a pipeline project (``app.py``).

    Raises:
        click.BadParameter: ``target`` exists and is not an empty directory.
    """
    check_name(name)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        msg = f"{target} already exists and is not empty: choose another NAME or --dir"
        raise click.BadParameter(msg, param_hint="--dir")
    module = module_name(name)
    values = {
        "name": name,
        "module": module,
        "properties": f"{name}.properties",
        "test_file": f"test_{module}.py",
    }
    kind, files = ("pipeline", PIPELINE_FILES) if pipeline else ("project", TASK_FILES)
    templates = resources.files("samzapy.cli") / "templates" / kind
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for source, pattern in files.items():
        path = target / Template(pattern).substitute(values)
        path.write_text(Template((templates / source).read_text(encoding="utf-8")).substitute(values))
        written.append(path)
    return written


@click.command(cls=Command)
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the project (default: ./NAME; a new or empty directory).",
)
@click.option(
    "--pipeline",
    is_flag=True,
    help="A pipeline (app.py, docs/pipelines.md) instead of a task class and its .properties.",
)
def init(name: str, directory: Path | None, pipeline: bool) -> None:
    """Start a project.

    A job counting events per user, its config on the embedded broker, a test with the harness
    and a README saying how to test and run it. With --pipeline: a pipeline (app.py) counting
    page views per user and minute, a test with PipelineHarness, the same README.
    """
    target = directory or Path(name)
    for path in write_project(name, target, pipeline=pipeline):
        click.echo(f"wrote {path}")
    click.echo(
        f"\nnext: cd {target} && python -m pytest -q   (pytest: pip install pytest; then README.md:"
        " run it on the dev broker)"
    )
