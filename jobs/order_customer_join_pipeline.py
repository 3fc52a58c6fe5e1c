"""Orders joined with their customer as a pipeline.

The foreign-key table-table join of :mod:`samzapy.jobs.order_customer_join`
(``config/order-customer-join.properties``). Run it with
``samzapy run samzapy.jobs.order_customer_join_pipeline:app``.

``orders`` (JSON keyed by order_id, with a ``customer_id``) and ``customers`` (JSON keyed by
customer_id) are tables, partitioned differently; every change that changes an order's
joined record sends ``{"order_id", "order", "customer"}`` (a tombstone when it is gone) to
``orders-with-customer``. The two halves of the join talk through the intermediate topics
``order-customer-join-pipeline-orders-customers-subscriptions`` and ``...-responses``. The
joined table (the last record per order) is the task version's (tests/unit/test_pipeline_jobs.py);
the ids differ where they name the response topic, whose name differs.
"""

from __future__ import annotations

import samzapy

app = samzapy.App("order-customer-join-pipeline")

orders = app.table("orders")
customers = app.table("customers")
(
    orders.join(
        customers,
        lambda order, customer: [order, customer],
        foreign_key=lambda order: order.get("customer_id"),
        name="orders-customers",
    )
    .to_stream()
    .map(
        lambda order_id, joined: (
            None if joined is None else {"order_id": order_id, "order": joined[0], "customer": joined[1]}
        ),
        with_key=True,
    )
    .to("orders-with-customer")
)
