"""The Kafka system on kafka-python: consumers, producer, admin, partitioner, dev broker.

:func:`fast_paths` tells which of the client fast paths (``producer-append``,
``consumer-decode``) are on in this process, and why not.
"""

from samzapy.kafka.fast_path_state import FastPath, fast_paths

__all__ = ["FastPath", "fast_paths"]
