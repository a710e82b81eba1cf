"""The router's counters and their Prometheus metrics, shared by every stage (below the
actors and the runtime, so each imports them without running up a floor)."""
