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
