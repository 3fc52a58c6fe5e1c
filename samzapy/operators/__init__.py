"""Reusable stateful building blocks: watermarks, timers, windows, joins, dedup, repartition.

Every block keeps its state only in the ``KeyValueStore[bytes, bytes]`` stores it is given
(configure them without serdes, i.e. bytes), so that after a restore a new instance over the
same stores continues exactly from the checkpointed state; every block is deterministic (the
same inputs in the same order give the same outputs, byte for byte), so re-sent outputs carry
the same ``samzapy.id``. Each block's store keys start with ``namespace`` and a tag of its own
(``0x00`` and two letters: ``wm`` watermark, ``te``/``tp`` timers, ``wt``/``ww``/``we`` windows,
``ri``/``rg``/``rm`` registry, ``di``/``db``/``dm`` dedup, ``fk`` foreign-key subscriptions),
so blocks of different kinds can share a store; two blocks of the same kind in one store need
distinct namespaces, none a prefix of another. The table, stream-table and foreign-key joins
take table stores with any serdes.

Event time across inputs and stages (control records, lineage headers, per-source
watermarks) is in :mod:`samzapy.operators.event_time`; the output-id scheme the blocks use is
:mod:`samzapy.output_ids` (re-exported here).
"""

from samzapy.operators.aggregators import Aggregator, count, max_of, min_of, reduce, sum_of
from samzapy.operators.dedup import BloomFilter, Deduplicator
from samzapy.operators.fk_join import ForeignKeyLeft, ForeignKeyRight, LeftUpdate, Response, Subscription
from samzapy.operators.joins import StreamTableJoin, TableChange, TableTableJoin
from samzapy.operators.registry import JoinRegistry
from samzapy.operators.repartition import Repartitioner, RepartitionError, RepartitionTask
from samzapy.operators.stream_join import JoinResult, StreamStreamJoin
from samzapy.operators.timers import Timer, TimerService
from samzapy.operators.watermark import Watermark
from samzapy.operators.windows import (
    Added,
    HoppingWindows,
    SessionWindows,
    TumblingWindows,
    WindowedAggregation,
    WindowResult,
)
from samzapy.output_ids import ID_HEADER, id_from_headers, id_header, join_id, output_id, window_id

__all__ = [
    "ID_HEADER",
    "Added",
    "Aggregator",
    "BloomFilter",
    "Deduplicator",
    "ForeignKeyLeft",
    "ForeignKeyRight",
    "HoppingWindows",
    "JoinRegistry",
    "JoinResult",
    "LeftUpdate",
    "RepartitionError",
    "RepartitionTask",
    "Repartitioner",
    "Response",
    "SessionWindows",
    "StreamStreamJoin",
    "StreamTableJoin",
    "Subscription",
    "TableChange",
    "TableTableJoin",
    "Timer",
    "TimerService",
    "TumblingWindows",
    "Watermark",
    "WindowResult",
    "WindowedAggregation",
    "count",
    "id_from_headers",
    "id_header",
    "join_id",
    "max_of",
    "min_of",
    "output_id",
    "reduce",
    "sum_of",
    "window_id",
]
