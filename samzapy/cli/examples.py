"""``samzapy examples list|copy``: the example jobs the docs speak of, from any install.

The docs name ``config/<name>.properties`` and ``jobs/<module>.py``; an installed wheel has
them as ``samzapy/example_configs/`` (data) and ``samzapy.jobs`` (code). ``list`` shows them,
``copy NAME DIR`` writes the job's ``.properties`` and its task module into ``DIR``, the
``task.class`` pointed at the copy, so that what runs is what you edit.
"""

from __future__ import annotations

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
    config: Path
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


def examples() -> list[Example]:
    """Every example job, by name."""
    from samzapy.quickstart import example_config_dir

    found = []
    for path in sorted(example_config_dir().glob("*.properties")):
        text = path.read_text(encoding="utf-8")
        summary = " ".join(
            line.lstrip("# ").strip() for line in text.splitlines()[:2] if line.startswith("#")
        )
        task = _TASK_CLASS.search(text)
        module, cls = (task.group(1), task.group(2)) if task else (None, None)
        found.append(Example(path.stem, path, summary, module, cls))
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
    text = example.config.read_text(encoding="utf-8")
    files: dict[Path, str] = {}
    code = example.code
    if code is not None and example.module is not None:
        files[target / code.name] = code.read_text(encoding="utf-8")
        text = _TASK_CLASS.sub(f"task.class={example.module}:{example.task_class}", text)
    files[target / example.config.name] = text
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
        click.echo(f"{example.name}\n    {example.summary}\n    config: {example.config}")
        if example.code is not None:
            click.echo(f"    code:   {example.code} ({example.task_class})")


@examples_group.command("copy")
@click.argument("name")
@click.argument("directory", metavar="DIR", default=".", type=click.Path(file_okay=False, path_type=Path))
def copy(name: str, directory: Path) -> None:
    """Copy example NAME's .properties and task module into DIR (default: here) to run and edit."""
    example = find(name)
    for path in copy_example(example, directory):
        click.echo(f"wrote {path}")
    click.echo(f"run it: samzapy run {directory / example.config.name}")
