"""The Kafka system on kafka-python: consumers, producer, admin, partitioner, dev broker."""
