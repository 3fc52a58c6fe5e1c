"""mkdocs hooks of the documentation site (mkdocs.yml ``hooks:``).

griffe (mkdocstrings' reader) finds modules on the filesystem, one package folder each; it
cannot follow setuptools' ``package-dir`` mapping of ``samzapy.stores`` -> ``stores/`` (and
``tools/``, ``jobs/``). :func:`on_startup` lays out ``build/docs-src/samzapy/`` as the installed
package looks: a symlink to every entry of ``samzapy/`` plus the three mapped folders. The
python handler's ``paths`` in mkdocs.yml point there. It is rebuilt on every build, so a new
module needs no step here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "build" / "docs-src" / "samzapy"
MAPPED = {"stores": "stores", "tools": "tools", "jobs": "jobs"}


def on_startup(command: str, dirty: bool) -> None:
    """Lay out the package for griffe; mkdocstrings' python handler reads its ``paths`` (a glob:
    a missing folder is dropped) when it is configured, so this must come first."""
    if LAYOUT.exists():
        shutil.rmtree(LAYOUT)
    LAYOUT.mkdir(parents=True)
    for entry in (ROOT / "samzapy").iterdir():
        if entry.name != "__pycache__":
            (LAYOUT / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (LAYOUT / name).symlink_to(ROOT / folder)
