"""Group mode: containers on any number of machines form one Kafka consumer group and share
the job's tasks (``job.coordinator.factory=group``)."""
