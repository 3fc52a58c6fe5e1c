"""``python -m samzapy`` is the ``samzapy`` command."""

from samzapy.cli.app import main

main()
