"""Tasks used by the state tools' integration tests (imported by job subprocesses)."""

from __future__ import annotations

from samzapy import InitableTask, StreamTask


class KeyValueTask(StreamTask, InitableTask):
    """Keeps the latest message per key in store ``kv`` and a per-key count in ``counts``.

    A message ``{"del": true}`` deletes the key from ``kv`` (a changelog tombstone); every
    message increments ``counts`` (overwrites). With ``app.freeze=true`` the task changes
    nothing and stops at its first message: a job run that only restores its stores.
    """

    def init(self, context) -> None:
        self.kv = context.get_store("kv")
        self.counts = context.get_store("counts")
        self.freeze = context.config.get_bool("app.freeze", False)

    def process(self, envelope, collector, coordinator) -> None:
        if self.freeze:
            coordinator.shutdown()
            return
        key, message = envelope.key, envelope.message
        if message.get("del"):
            self.kv.delete(key)
        else:
            self.kv.put(key, message)
        self.counts.put(key, (self.counts.get(key) or 0) + 1)
