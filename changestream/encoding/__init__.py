"""What changes become when they leave: the change record formats (JSON lines, the original
format) and the text of temporal values, shared by the router, the decode workers, the
snapshot reader and the sinks."""
