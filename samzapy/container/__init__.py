"""The container: tasks, the run loop, commits."""
