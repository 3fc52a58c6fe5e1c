"""Closing fixed windows decodes their stored keys the fast way: the same results as the layout's.

``WindowedAggregation`` decodes each due window's key, start, end and id without the layout's
general decoder; these tests compare every result with
:func:`~samzapy.operators.window_layout.decode_fixed_key` and
:func:`~samzapy.output_ids.window_id` of the stored keys, for awkward keys and times.
"""

from __future__ import annotations

import random

from samzapy.operators import HoppingWindows, TumblingWindows, WindowedAggregation, count
from samzapy.operators.watermark import Watermark
from samzapy.operators.window_layout import FIXED_TAG, decode_fixed_key
from samzapy.output_ids import window_id
from samzapy.stores.memory import InMemoryStore

AWKWARD_KEYS = [b"", b"\x00", b"\x00\x01", b"a\x00\xffb", b"\xff\xff", b"\x00\x00\x01\x02", b"user-7"]


def _expected(store: InMemoryStore, namespace: bytes) -> list[tuple[bytes, int, int, int, str]]:
    """(key, start, end, count, id) of every stored window, by the layout's own decoder."""
    prefix = namespace + FIXED_TAG
    found = []
    for stored_key, value in store.all():
        if stored_key.startswith(prefix):
            key, start, end = decode_fixed_key(stored_key, len(prefix))
            found.append((key, start, end, int(value), window_id(key, start, end)))
    return found


def _closed(windows: WindowedAggregation, limit: int | None) -> list[tuple[bytes, int, int, int, str | None]]:
    out = []
    while results := windows.close_due(limit=limit):
        out += [(r.key, r.start, r.end, r.value, r.id) for r in results]
        if limit is None:
            break
    return out


def test_fast_close_equals_the_layout_decoder_for_awkward_keys_and_times() -> None:
    rng = random.Random(5)
    for assigner in (TumblingWindows(10), HoppingWindows(10, 5), TumblingWindows(1_000, offset_ms=3)):
        for namespace, limit in ((b"", None), (b"cw", 7), (b"\x00", 1)):
            store = InMemoryStore()
            watermark = Watermark(store, namespace=namespace)
            windows = WindowedAggregation(store, assigner, count(), watermark, namespace=namespace)
            keys = AWKWARD_KEYS + [rng.randbytes(rng.randrange(1, 12)) for _ in range(30)]
            for _ in range(400):
                windows.add(rng.choice(keys), rng.randrange(-5_000, 5_000), None)
            expected = sorted(_expected(store, namespace), key=lambda w: (w[2], w[0], w[1]))
            assert len(expected) > 50
            watermark.advance_to(10**6)
            closed = _closed(windows, limit)
            assert sorted(closed, key=lambda w: (w[2], w[0], w[1])) == expected
            assert _expected(store, namespace) == []
