"""The stateful patterns as tasks, and the Spark replay job."""
