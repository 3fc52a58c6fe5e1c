"""The package list in pyproject.toml matches the folders on disk.

With an explicit package list, a subpackage missing from it still imports in an editable
install but is left out of the wheel; this test catches that before a release does.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_folders() -> set[str]:
    """Every folder with an ``__init__.py`` under samzapy/ and the mapped top-level folders,
    named as the installed package."""
    mapped = _pyproject()["tool"]["setuptools"]["package-dir"]
    roots = {"samzapy": ROOT / "samzapy", **{name: ROOT / folder for name, folder in mapped.items()}}
    found = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    return found


def _data_packages() -> set[str]:
    """Mapped folders without code that ship as package data (config/)."""
    setuptools = _pyproject()["tool"]["setuptools"]
    return {name for name in setuptools["package-dir"] if name in setuptools["package-data"]}


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    assert _package_folders() | _data_packages() == listed


def test_the_example_configs_ship_as_package_data():
    """config/ holds no code: it is a data package, and every job file in it is included."""
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["package-dir"]["samzapy.example_configs"] == "config"
    assert not (ROOT / "config" / "__init__.py").exists()
    assert "*.properties" in setuptools["package-data"]["samzapy.example_configs"]


def test_mapped_folders_are_flat():
    """stores/, tools/ and jobs/ hold modules only: a subpackage there would need its own
    package-dir entry (STYLE.md, packaging traps)."""
    mapped = _pyproject()["tool"]["setuptools"]["package-dir"]
    for folder in mapped.values():
        nested = [p for p in (ROOT / folder).iterdir() if p.is_dir() and (p / "__init__.py").exists()]
        assert nested == [], f"{folder}/ has subpackages {nested}"


def _requirement(name: str, *, extra: str | None = None) -> str:
    table = _pyproject()["project"]
    found = table["dependencies"] if extra is None else table["optional-dependencies"][extra]
    matches = [r for r in found if r.split("[")[0].split(">")[0].split("<")[0].split("=")[0] == name]
    assert len(matches) == 1, f"{name} in {found}"
    return matches[0]


def test_client_pins_match_the_versions_the_fast_paths_were_checked_against():
    """kafka-python and aiokafka are pinned to the minor releases whose internals
    samzapy.kafka.fast_append and fast_decode use; widening a pin means checking them again."""
    from samzapy.kafka import fast_append, fast_decode

    assert fast_append.SUPPORTED_VERSIONS == fast_decode.SUPPORTED_VERSIONS == ("3.0.",)
    assert _requirement("kafka-python") == "kafka-python[crc32c]>=3.0.12,<3.1"
    assert fast_decode.SUPPORTED_AIOKAFKA == ("0.14.",)
    assert _requirement("aiokafka") == "aiokafka>=0.14,<0.15"


def test_every_requirement_has_an_upper_bound():
    table = _pyproject()["project"]
    runtime = list(table["dependencies"])
    runtime += [r for extra in ("broker", "spark") for r in table["optional-dependencies"][extra]]
    unbounded = [r for r in runtime if "<" not in r]
    assert unbounded == []
