"""The one place where an error becomes an ``Error:`` line and an exit code.

Every command of ``samzapy`` and of the state tools runs inside :func:`error_boundary`: the
:class:`Group` and :class:`Command` classes wrap their ``invoke`` in it. Library code raises
and never calls ``sys.exit``; only here does an exception meet a person.

======================================================  ====  ===============================
raised                                                   exit  printed on stderr
======================================================  ====  ===============================
:class:`~samzapy.errors.ConfigError`,                    2     ``Error: <message>``
:class:`~samzapy.errors.BadArgumentError`, click's
usage errors
any other :class:`~samzapy.errors.SamzapyError`          1     ``Error: <message>``
anything else (a bug, or user code outside a message)    1     ``Error: <Type>: <message>
                                                               (raised at file:line ...)``
======================================================  ====  ===============================

The message of a samzapy error names the object, the value, what was expected and the fix;
the boundary adds nothing to it. The traceback is logged as one record that reaches the
console only with ``-v`` and the ``--log-file`` always (:mod:`samzapy.cli.logs`), so the
console never shows a chain of "During handling of the above exception".
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from samzapy.cli.logs import VERBOSE_ONLY, is_verbose
from samzapy.errors import BadArgumentError, ConfigError, SamzapyError

log = logging.getLogger("samzapy.cli")

#: Exit code of a bad argument or configuration (click's own usage errors use it too).
EXIT_BAD_REQUEST = 2
#: Exit code of a failure while doing the work.
EXIT_FAILURE = 1


class BadRequest(click.ClickException):
    """``Error: <message>`` and exit 2, without click's usage text."""

    exit_code = EXIT_BAD_REQUEST


def describe_unexpected(exc: BaseException) -> str:
    """One line for an exception samzapy did not raise on purpose: type, message, where.

    >>> try:
    ...     {}["k"]
    ... except KeyError as e:
    ...     describe_unexpected(e).split(" (raised at ")[0]
    "KeyError: 'k'"
    """
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if frames:
        last = frames[-1]
        text += f" (raised at {Path(last.filename).name}:{last.lineno} in {last.name})"
    return text


def _log_traceback(exc: BaseException) -> None:
    log.error("the command failed: %s", exc, exc_info=exc, extra={VERBOSE_ONLY: True})


@contextmanager
def error_boundary() -> Iterator[None]:
    """Turn an exception into click's ``Error:`` line and exit code (the module's table)."""
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except (ConfigError, BadArgumentError) as exc:
        _log_traceback(exc)
        raise BadRequest(str(exc)) from None
    except SamzapyError as exc:
        _log_traceback(exc)
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        _log_traceback(exc)
        hint = "" if is_verbose() else "; run with -v for the traceback"
        raise click.ClickException(describe_unexpected(exc) + hint) from None


#: ``-h`` as well as ``--help``, on every command (subcommands inherit it from their group).
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


def _with_help_alias(kwargs: dict[str, Any]) -> dict[str, Any]:
    settings = dict(kwargs.get("context_settings") or {})
    settings.setdefault("help_option_names", HELP_OPTIONS["help_option_names"])
    return {**kwargs, "context_settings": settings}


def name_typed_option(error: click.BadParameter, args: list[str]) -> None:
    """Make ``error`` name its option as the user typed it.

    ``--config``, say, rather than every spelling click knows (``'--config-path' / '--config'``).
    """
    param = error.param
    if error.param_hint is not None or not isinstance(param, click.Option):
        return
    names = [*param.opts, *param.secondary_opts]
    if len(names) < 2:
        return
    typed = [n for n in names if any(a == n or a.startswith(n + "=") for a in args)]
    if typed:
        error.param_hint = f"'{typed[-1]}'"


class _BoundaryCommand(click.Command):
    """What :class:`Command` and :class:`Group` share; ``invoke`` runs in :func:`error_boundary`.

    ``-h`` is help, and a bad value's error names the option as it was typed.

    :class:`Group` lists this class before ``click.Group``, so its ``super()`` calls reach
    ``click.Group`` there and ``click.Command`` in :class:`Command`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **_with_help_alias(kwargs))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse ``args``; a bad value's error names the option as it was typed."""
        typed = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.BadParameter as error:
            name_typed_option(error, typed)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command (a group's: and the chosen subcommand); errors become ``Error:`` lines.

        The boundary maps them to exit codes (module docstring).
        """
        with error_boundary():
            return super().invoke(ctx)


class Command(_BoundaryCommand):
    """A click command that runs inside :func:`error_boundary`; ``-h`` is help.

    Also when it is invoked alone, as ``spark-submit jobs/spark_replay.py`` does with
    ``samzapy replay``.
    """


class Group(_BoundaryCommand, click.Group):
    """A click group whose subcommands (and its own callback) run inside :func:`error_boundary`.

    ``-h`` is help.
    """

    command_class = Command
    group_class = type  # subgroups are of this class too
