"""Click pieces both tools share: the ``--config-path`` option and error mapping.

Exit codes follow click: 2 for bad input (an argument naming something that does not exist or
does not parse: :class:`~samzapy.tools.common.BadInputError`), 1 for a failure while doing
the work (:class:`~samzapy.errors.SamzapyError`), 0 otherwise. The message is one line (or
the config problems, one per line) after ``Error:``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from samzapy.errors import SamzapyError
from samzapy.tools.common import BadInputError

F = TypeVar("F", bound=Callable[..., Any])


class BadInput(click.ClickException):
    """A bad argument: ``Error: <message>`` and exit 2 (without the usage text)."""

    exit_code = 2


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn samzapy errors into click's: bad input exits 2, other failures 1."""
    try:
        yield
    except BadInputError as exc:
        raise BadInput(str(exc)) from exc
    except SamzapyError as exc:
        raise click.ClickException(str(exc)) from exc


def config_path_option(func: F) -> F:
    """``--config-path PATH``: a path or Samza's ``file:///...`` form."""
    return click.option(
        "--config-path",
        required=True,
        metavar="PATH",
        help="The job's .properties file (a path or a file:///... URI).",
    )(func)


def setup_logging(verbose: bool) -> None:
    """Warnings only by default (the tools print their own progress); INFO with ``-v``.

    kafka-python's own warnings (slow event-loop tasks during bulk reads) only with ``-v``.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kafka").setLevel(logging.WARNING if verbose else logging.ERROR)
