"""Sink adapters: where committed transactions are delivered (JSON lines, callback, Spark)."""
