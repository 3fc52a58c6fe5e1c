"""A griffe extension of the documentation site (mkdocs.yml, the python handler's
``extensions``): the docstrings cross-reference in Sphinx's roles (:class:`~samzapy.task.StreamTask`,
:meth:`get_store`), which markdown shows as they are typed (":class: ~samzapy.task.StreamTask"
on the page). Each role becomes inline code of the name a reader would type (``StreamTask``,
``get_store``); the source docstrings are left as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: :role:`target`, :role:`~dotted.target` or :role:`title <target>`.
ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):`(~?)([^`<]*?)(?:\s*<[^>`]+>)?`")


def plain(text: str) -> str:
    """The docstring ``text`` with each Sphinx role as inline code.

    >>> plain("a :class:`~samzapy.task.StreamTask` and :meth:`get_store`, :mod:`samzapy.pipeline`")
    'a `StreamTask` and `get_store`, `samzapy.pipeline`'
    >>> plain(":func:`the harness <samzapy.testing.TaskHarness>`")
    '`the harness`'
    """

    def one(match: re.Match[str]) -> str:
        tilde, target = match.group(1), match.group(2).strip()  # a title, when one is given
        return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"

    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring griffe loads (see the module)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Each object (module, class, function, attribute) once, as griffe loads it."""
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
