"""Reusable stateful building blocks: watermarks, timers, windows, joins, dedup."""
