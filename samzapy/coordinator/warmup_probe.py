"""When a member that warms up copies asks the group for a rebalance (KIP-441's probe).

The leader moves a task to the member keeping a warm-up copy of it only in a rebalance, once the
copy is within ``job.coordinator.acceptable.recovery.lag`` of the owner's state. Such a rebalance
comes two ways:

- **caught up**: as soon as every warm-up copy this member keeps is within the acceptable lag
  (it knows each copy's lag: the owner's committed changelog offset minus the copy's newest
  local checkpoint, which is what the leader compares), at most once per
  :data:`CAUGHT_UP_PROBE_FLOOR_S`, so that a copy the leader still finds behind (its view comes
  from the subscriptions, a little older) cannot make the member rejoin in a loop;
- **periodic**: every ``job.coordinator.probing.rebalance.interval.ms`` while copies are warming
  up (a copy whose lag is not known, or one that never catches up, still gets its probe).

:class:`ProbeSchedule` holds that decision and nothing else (no clock, no client), so it is
tested without a group; :class:`~samzapy.coordinator.group.GroupMembership` asks it each poll.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: At most one caught-up probe per this many seconds (the storm floor).
CAUGHT_UP_PROBE_FLOOR_S = 5.0
#: :meth:`ProbeSchedule.due`'s answers.
CAUGHT_UP = "caught-up"
PERIODIC = "periodic"


def caught_up(warmups: Sequence[int], lags: Mapping[int, int | None], acceptable_lag: int) -> bool:
    """Whether every copy in ``warmups`` is known to be at most ``acceptable_lag`` records behind.

    A copy missing from ``lags`` or with lag ``None`` (not known yet: the copy has not read the
    owner's checkpoint, or it failed) is not caught up.
    """
    if not warmups:
        return False
    for task in warmups:
        lag = lags.get(task)
        if lag is None or lag > acceptable_lag:
            return False
    return True


class ProbeSchedule:
    """Decides, poll by poll, whether this member asks for a probing rebalance now.

    Args:
        every_s: the periodic probing interval (``job.coordinator.probing.rebalance.interval.ms``).
        acceptable_lag: ``job.coordinator.acceptable.recovery.lag``.
        floor_s: at most one caught-up probe per this many seconds.
    """

    def __init__(self, every_s: float, acceptable_lag: int, floor_s: float = CAUGHT_UP_PROBE_FLOOR_S) -> None:
        self.every_s = every_s
        self.acceptable_lag = acceptable_lag
        self.floor_s = floor_s
        self._periodic_at: float | None = None
        self._caught_up_at: float | None = None  # the last caught-up probe

    def due(self, warmups: Sequence[int], lags: Mapping[int, int | None], now: float) -> str | None:
        """:data:`CAUGHT_UP`, :data:`PERIODIC` or ``None`` (no probe now).

        Call it only while the group is stable (a probe asked in a join is lost in it); a
        probe it answers counts as made. ``now`` is a monotonic clock in seconds. Without
        warm-up copies it answers ``None`` and the periodic clock starts again with the next
        copies.
        """
        if not warmups:
            self._periodic_at = None
            return None
        if self._periodic_at is None:
            self._periodic_at = now + self.every_s
        if caught_up(warmups, lags, self.acceptable_lag) and (
            self._caught_up_at is None or now - self._caught_up_at >= self.floor_s
        ):
            self._caught_up_at = now
            self._periodic_at = now + self.every_s
            return CAUGHT_UP
        if now >= self._periodic_at:
            self._periodic_at = now + self.every_s
            return PERIODIC
        return None
