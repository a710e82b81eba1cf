"""What leaves the router: change records, the sink adapter interface and its
plugins, positions, backpressure."""
