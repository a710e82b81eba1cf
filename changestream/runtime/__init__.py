"""Running a router: the Router, the listener thread, configuration, status and
metrics, the control endpoint, pre-flight checks, logs."""
