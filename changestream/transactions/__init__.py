"""Committed transactions out of decoded events: grouping, XA, big transactions
spilled to disk, filters, row images."""
