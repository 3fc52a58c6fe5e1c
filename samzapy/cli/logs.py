"""Logging of every command line: ``samzapy`` and the two state tools.

One :func:`setup_logging` for all of them. What a person sees on the console (stderr) is one
line per record and never a traceback, unless ``-v`` asks for them; the ``--log-file`` gets
every record with its traceback. A record marked :data:`VERBOSE_ONLY` (the error boundary's
"here is the traceback" record, see :mod:`samzapy.cli.boundary`) reaches the console only
with ``-v``: without it, the ``Error:`` line says all there is to say.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from samzapy import user_code

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
#: ``extra={VERBOSE_ONLY: True}`` keeps a record off the console unless ``-v`` was given.
VERBOSE_ONLY = user_code.VERBOSE_ONLY
_OURS = "_samzapy_cli_handler"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (click's test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]  # noqa: ANN201 - a text stream
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


class ConsoleFormatter(logging.Formatter):
    """One line per record: a traceback is left out (and pointed to) unless ``verbose``."""

    def __init__(self, verbose: bool) -> None:
        super().__init__(FORMAT)
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (with its traceback when verbose)."""
        if self.verbose or not (record.exc_info or record.stack_info):
            return super().format(record)
        plain = logging.makeLogRecord(record.__dict__)
        plain.exc_info, plain.exc_text, plain.stack_info = None, None, None
        return super().format(plain) + " (the traceback: run with -v, or see --log-file)"


def setup_logging(verbose: bool = False, *, level: int = logging.INFO, log_file: Path | None = None) -> None:
    """Configure logging for a command; calling it again replaces what it set up before.

    Args:
        verbose: ``-v``: the console shows DEBUG records and tracebacks.
        level: the console's level without ``-v`` (``samzapy``: INFO; the tools, which print
            their own progress: WARNING). kafka-python logs one level quieter (INFO with ``-v``).
        log_file: also append every record from INFO (DEBUG with ``-v``) to this file, with
            tracebacks.

    When something else already put handlers on the root logger (pytest, an application
    embedding the CLI), the console is left to it.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
        handler.close()
    handlers: list[logging.Handler] = []
    if not root.handlers:
        console = _Stderr()
        console.setLevel(logging.DEBUG if verbose else level)
        console.setFormatter(ConsoleFormatter(verbose))
        console.addFilter(lambda record: verbose or not getattr(record, VERBOSE_ONLY, False))
        handlers.append(console)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file = logging.FileHandler(log_file, encoding="utf-8")
        file.setLevel(logging.DEBUG if verbose else logging.INFO)
        file.setFormatter(logging.Formatter(FORMAT))
        handlers.append(file)
    for handler in handlers:
        setattr(handler, _OURS, True)
        root.addHandler(handler)
    if handlers:
        root.setLevel(min(h.level for h in handlers))
    logging.getLogger("kafka").setLevel(logging.INFO if verbose else max(logging.WARNING, level + 10))


def is_verbose() -> bool:
    """Whether the console shows tracebacks (``-v``), as :func:`setup_logging` last set it."""
    for handler in logging.getLogger().handlers:
        if getattr(handler, _OURS, False) and isinstance(handler.formatter, ConsoleFormatter):
            return handler.formatter.verbose
    return False
