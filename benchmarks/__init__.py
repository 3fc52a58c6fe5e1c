"""samzapy's benchmark suite: ``python -m benchmarks [--size tiny|small|full] [--only NAME,...]``.

Each ``bench_*`` module is a script that measures one thing against raw limits measured in
the same run and writes its rows as JSON (see :mod:`benchmarks._common`); ``__main__`` runs
them one by one in subprocesses, measures each one's peak RSS, and prints one table. This
folder is not an installed package: run it from the repository root.
"""
