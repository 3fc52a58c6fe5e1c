"""The offset tracker of concurrent tasks: examples, then hypothesis properties over any
completion order, retries and timeouts (late completions of superseded attempts)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samzapy.container.offset_tracker import OffsetTracker


def test_committable_stops_at_the_lowest_in_flight_offset() -> None:
    tracker = OffsetTracker(start=120)
    assert tracker.committable() == 120
    tracker.start(120)
    tracker.start(121)
    tracker.done(121)
    assert tracker.committable() == 120
    tracker.done(120)
    assert tracker.committable() == 122


def test_gaps_in_offsets_are_skipped_once_everything_before_is_done() -> None:
    tracker = OffsetTracker(start=0)
    for offset in (0, 1, 5):  # 2..4 do not exist (compaction, transaction markers)
        tracker.start(offset)
    tracker.done(0)
    tracker.done(1)
    assert tracker.committable() == 5
    tracker.done(5)
    assert tracker.committable() == 6


def test_retry_returns_the_attempt_and_a_stale_completion_is_ignored() -> None:
    tracker = OffsetTracker()
    assert tracker.start(0) == 1
    assert tracker.start(0) == 2  # timed out, retried
    assert tracker.done(0, attempt=1) is False  # the first attempt finishing late
    assert tracker.committable() == 0
    assert tracker.done(0, attempt=2) is True
    assert tracker.committable() == 1


def test_done_twice_is_a_no_op() -> None:
    tracker = OffsetTracker()
    tracker.start(0)
    assert tracker.done(0) is True
    assert tracker.done(0) is False
    assert tracker.committable() == 1


def test_starting_an_old_offset_that_is_not_in_flight_is_refused() -> None:
    tracker = OffsetTracker()
    tracker.start(0)
    tracker.start(1)
    tracker.done(0)
    with pytest.raises(ValueError, match="offset 0 is not in flight"):
        tracker.start(0)


def test_done_of_an_offset_never_started_is_refused() -> None:
    tracker = OffsetTracker(start=10)
    with pytest.raises(ValueError, match="never started"):
        tracker.done(10)
    with pytest.raises(ValueError, match="start offset"):
        OffsetTracker(start=-1)


# -- properties -------------------------------------------------------------------------------

# An action is (kind, pick): "new" takes in the next offset (after a gap of `pick % 3`);
# "done" finishes the in-flight offset picked; "retry" starts it again; "stale" completes an
# older attempt of it (a timed-out attempt finishing late); "again" repeats a done() of an
# offset that is finished already.
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["new", "new", "done", "done", "retry", "stale", "again"]), st.integers(0, 10**6)
    ),
    max_size=300,
)


class Model:
    """The plain truth the tracker is compared with."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.next = start
        self.taken: list[int] = []
        self.in_flight: dict[int, int] = {}  # offset -> attempt
        self.done: set[int] = set()


def apply(tracker: OffsetTracker, model: Model, kind: str, pick: int) -> None:
    flying = sorted(model.in_flight)
    if kind == "new" or not flying and kind != "again":
        offset = model.next + pick % 3
        assert tracker.start(offset) == 1
        model.taken.append(offset)
        model.in_flight[offset] = 1
        model.next = offset + 1
        return
    if kind == "again":
        if model.done:
            offset = sorted(model.done)[pick % len(model.done)]
            assert tracker.done(offset) is False
        return
    offset = flying[pick % len(flying)]
    if kind == "done":
        assert tracker.done(offset, attempt=model.in_flight.pop(offset)) is True
        model.done.add(offset)
    elif kind == "retry":
        model.in_flight[offset] += 1
        assert tracker.start(offset) == model.in_flight[offset]
    elif kind == "stale" and model.in_flight[offset] > 1:
        assert tracker.done(offset, attempt=model.in_flight[offset] - 1) is False


@settings(max_examples=300, deadline=None)
@given(start=st.integers(0, 1000), actions=ACTIONS)
def test_committable_never_passes_an_unfinished_offset(start: int, actions: list[tuple[str, int]]) -> None:
    tracker, model = OffsetTracker(start), Model(start)
    previous = start
    for kind, pick in actions:
        apply(tracker, model, kind, pick)
        committable = tracker.committable()
        # never past the lowest in-flight offset ...
        if model.in_flight:
            assert committable <= min(model.in_flight)
        # ... every offset taken in below it is done ...
        assert all(o in model.done for o in model.taken if o < committable)
        # ... it never goes back, and it is as far as it may be.
        assert committable >= previous
        assert committable == (min(model.in_flight) if model.in_flight else model.next)
        assert tracker.in_flight == len(model.in_flight)
        previous = committable


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 200),
    order=st.randoms(use_true_random=False),
    retries=st.sets(st.integers(0, 199), max_size=50),
)
def test_any_completion_order_ends_at_the_offset_after_the_last(count, order, retries) -> None:
    tracker = OffsetTracker(start=0)
    for offset in range(count):
        tracker.start(offset)
    attempt = {o: tracker.start(o) if o in retries else 1 for o in range(count)}
    finish = list(range(count))
    order.shuffle(finish)
    for offset in finish:
        if attempt[offset] > 1:
            tracker.done(offset, attempt=1)  # the timed-out first attempt: ignored
        assert tracker.committable() <= offset
        tracker.done(offset, attempt=attempt[offset])
    assert tracker.committable() == count
    assert tracker.in_flight == 0
