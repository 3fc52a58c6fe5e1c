"""``samzapy examples list|copy``: the example jobs the docs speak of, from any install.

The docs name ``config/<name>.properties`` and ``jobs/<module>.py``; an installed wheel has
them as ``samzapy/example_configs/`` (data) and ``samzapy.jobs`` (code). ``list`` shows them,
``copy NAME DIR`` writes the job's ``.properties`` and its task module into ``DIR``, the
``task.class`` pointed at the copy, so that what runs is what you edit. The pipelines
(``jobs/*_pipeline.py``, docs/pipelines.md) are examples too, named like their app: ``copy``
writes the module, which ``samzapy run`` takes as it is.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import click

from samzapy.cli.boundary import Group

_TASK_CLASS = re.compile(r"^task\.class\s*[=:]\s*samzapy\.jobs\.(\w+)[:.](\w+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Example:
    """One example job: its config file, what it does, and its task module."""

    name: str
    config: Path | None  # None for a pipeline: the module is the whole job
    summary: str
    module: str | None  # samzapy.jobs.<module>, None when task.class is elsewhere
    task_class: str | None

    @property
    def code(self) -> Path | None:
        """The task module's source file, where it is installed."""
        if self.module is None:
            return None
        spec = importlib.util.find_spec(f"samzapy.jobs.{self.module}")
        return Path(spec.origin) if spec and spec.origin else None


def first_sentence(text: str) -> str:
    r"""The first sentence of ``text`` (whitespace joined), or all of it.

    >>> first_sentence("Orders joined with their customer (a join). Every change\n# sends it.")
    'Orders joined with their customer (a join).'
    """
    joined = " ".join(text.split())
    end = re.search(r"\.(\s|$)", joined)
    return joined[: end.start() + 1] if end else joined


def examples() -> list[Example]:
    """Every example job, by name: the task jobs (by config file), then the pipelines."""
    from samzapy.quickstart import example_config_dir

    found = []
    for path in sorted(example_config_dir().glob("*.properties")):
        text = path.read_text(encoding="utf-8")
        header = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            header.append(line.lstrip("# "))
        task = _TASK_CLASS.search(text)
        module, cls = (task.group(1), task.group(2)) if task else (None, None)
        found.append(Example(path.stem, path, first_sentence(" ".join(header)), module, cls))
    return found + _pipelines()


def _pipelines() -> list[Example]:
    spec = importlib.util.find_spec("samzapy.jobs")
    folders = spec.submodule_search_locations if spec and spec.submodule_search_locations else []
    found = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*_pipeline.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            found.append(Example(path.stem.replace("_", "-"), None, first_sentence(doc), path.stem, None))
    return found


def find(name: str) -> Example:
    """The example called ``name``.

    Raises:
        click.BadParameter: no such example (the names are listed).
    """
    known = examples()
    for example in known:
        if example.name == name:
            return example
    msg = f"no example '{name}': one of {', '.join(e.name for e in known)}"
    raise click.BadParameter(msg, param_hint="NAME")


def copy_example(example: Example, target: Path) -> list[Path]:
    """Write ``example``'s config (and task module, ``task.class`` pointed at it) into ``target``.

    Raises:
        click.BadParameter: a file to write exists already.
    """
    files: dict[Path, str] = {}
    code = example.code
    if example.config is None:  # a pipeline: its module is the job
        assert code is not None
        files[target / code.name] = code.read_text(encoding="utf-8")
        return _write(files, target)
    text = example.config.read_text(encoding="utf-8")
    if code is not None and example.module is not None:
        files[target / code.name] = code.read_text(encoding="utf-8")
        text = _TASK_CLASS.sub(f"task.class={example.module}:{example.task_class}", text)
    files[target / example.config.name] = text
    return _write(files, target)


def _write(files: dict[Path, str], target: Path) -> list[Path]:
    clash = [str(path) for path in files if path.exists()]
    if clash:
        msg = f"{', '.join(clash)} exists already: copy into another directory"
        raise click.BadParameter(msg, param_hint="DIR")
    target.mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        path.write_text(content, encoding="utf-8")
    return list(files)


@click.group("examples", cls=Group)
def examples_group() -> None:
    """The example jobs (windows, joins, filters) the docs speak of: list them, copy one."""


@examples_group.command("list")
def list_examples() -> None:
    """Name, what it does and where its config and code are, one example a paragraph."""
    for example in examples():
        click.echo(f"{example.name}\n    {example.summary}")
        if example.config is None:
            click.echo(f"    code:   {example.code} (a pipeline)")
            click.echo(f"    run:    samzapy run samzapy.jobs.{example.module}:app")
            continue
        click.echo(f"    config: {example.config}")
        if example.code is not None:
            click.echo(f"    code:   {example.code} ({example.task_class})")


@examples_group.command("copy")
@click.argument("name")
@click.argument("directory", metavar="DIR", default=".", type=click.Path(file_okay=False, path_type=Path))
def copy(name: str, directory: Path) -> None:
    """Copy example NAME's .properties and task module into DIR (default: here) to run and edit."""
    example = find(name)
    written = copy_example(example, directory)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"run it: samzapy run {written[-1]}")
