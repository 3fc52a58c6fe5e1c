"""The exception hierarchy: one base class, one subclass per area."""


class SamzapyError(Exception):
    """Base class of every error samzapy raises on purpose."""


class ConfigError(SamzapyError):
    """The job configuration is missing a key or holds a value that cannot be used."""


class SerdeError(SamzapyError):
    """A value could not be serialised or deserialised."""


class StoreError(SamzapyError):
    """A key-value store could not be opened, read, written or restored."""


class StoreLockedError(StoreError):
    """Another live process holds the RocksDB lock of a store directory."""


class RestoreError(StoreError):
    """A store could not be rebuilt from its changelog."""


class KafkaSystemError(SamzapyError):
    """The Kafka system failed: a topic is missing or misconfigured, or the broker is unreachable."""


class CheckpointError(SamzapyError):
    """A checkpoint could not be read or written."""


class TaskError(SamzapyError):
    """User task code failed; the message names the stream, partition and offset involved."""


class BrokerError(SamzapyError):
    """The embedded development broker could not be started, found or stopped."""


class StorageFailure(StoreError):
    """A store's engine failed underneath the task: an IO error, corruption, a full or read-only disk.

    It is never a message error: no skip or dead-letter policy swallows it; the task stops and
    nothing after the last commit is committed.

    Attributes:
        store: the store's name, when known.
        path: the store's directory or the file involved, when known.
    """

    def __init__(self, text: str, *, store: str | None = None, path: str | None = None) -> None:
        super().__init__(text)
        self.store = store
        self.path = path


class BadArgumentError(SamzapyError):
    """An argument names something that does not exist or does not parse.

    A store, a partition, an offset, a key: the request is wrong, not the system. Commands exit
    2 on it, as on a :class:`ConfigError`; on every other :class:`SamzapyError` they exit 1.
    """
