"""Group mode: containers on any number of machines share a job's tasks as one consumer group.

Chosen with ``job.coordinator.factory=group``.
"""
