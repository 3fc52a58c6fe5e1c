"""Orders joined with their customer as a pipeline.

The foreign-key table-table join of :mod:`samzapy.jobs.order_customer_join`
(``config/order-customer-join.properties``). Run it with
``samzapy run samzapy.jobs.order_customer_join_pipeline:app``.

``orders`` (JSON keyed by order_id, with a ``customer_id``) and ``customers`` (JSON keyed by
customer_id) are tables, partitioned differently; every change that changes an order's
joined record sends ``{"order_id", "order", "customer"}`` (a tombstone when it is gone) to
``orders-with-customer`` and keeps it in the store ``order-customer-joined``. The two halves
of the join talk through the intermediate topics
``order-customer-join-pipeline-order-customer-subscriptions`` and ``...-responses``; the ids
name them by the stage, ``order-customer-subscriptions`` and ``-responses``, the task
version's topics: the same changes, ids and store contents as the task version (its stores
``fk-left``, ``fk-right``, ``fk-subscriptions``, ``joined``; tests/unit/test_pipeline_jobs.py).
"""

from __future__ import annotations

import samzapy

app = samzapy.App("order-customer-join-pipeline")

orders = app.table("orders")
customers = app.table("customers")
orders.join(
    customers,
    lambda order_id, order, customer: {"order_id": order_id, "order": order, "customer": customer},
    with_key=True,
    foreign_key=lambda order: order.get("customer_id"),
    name="order-customer",
).to("orders-with-customer")
