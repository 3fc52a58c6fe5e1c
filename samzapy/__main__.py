"""``python -m samzapy`` is the ``samzapy`` command."""

from samzapy.cli import main

main()
