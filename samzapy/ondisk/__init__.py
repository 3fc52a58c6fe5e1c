"""Stores on disk read from outside the job that owns them.

Located, opened as RocksDB secondary instances without taking the job's lock
(:mod:`~samzapy.ondisk.secondary`), checked for damage (:mod:`~samzapy.ondisk.damage`), and
asked whether a live process has them open (:mod:`~samzapy.ondisk.locks`). Shared by the
command-line tools and state as data.
"""
