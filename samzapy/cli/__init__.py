"""The command lines: ``samzapy`` (one module per subcommand) and what the state tools share.

=======================  =====================================================================
module                   what
=======================  =====================================================================
``app``                  ``main``, the ``samzapy`` group (``-v``, ``--log-file``, ``--version``)
``run``                  ``samzapy run [CONFIG | --config-path CONFIG]``: one container of a job
``broker``               ``samzapy broker start|stop|status``: the embedded dev broker
``checkpoint``           ``samzapy checkpoint show|set``: a job's input checkpoints
``replay``               ``samzapy replay``: a job's input history through Spark
``generate``             ``samzapy generate ...``: seeded example data
``quickstart``           ``samzapy quickstart``: the page-view counter end to end
``boundary``             the one mapping of errors to ``Error:`` lines and exit codes
``logs``                 the one ``setup_logging``
``options``              options every command shares (``--config-path``, ``--config``, ``-v``)
=======================  =====================================================================

``samzapy.tools`` (``state-storage-tool``, ``read-rocksdb-tool``) use ``boundary``, ``logs``
and ``options`` too. Every command is a thin layer over library code that raises
:class:`samzapy.errors.SamzapyError` subclasses and never exits the process.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # ``samzapy.cli:main`` without importing every command for the tools' use of this package.
    if name == "main":
        from samzapy.cli.app import main

        return main
    msg = f"module 'samzapy.cli' has no attribute {name!r}"
    raise AttributeError(msg)
