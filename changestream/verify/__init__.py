"""``changestream verify``: a mirror compared with its source table while both run, without
locks (docs/verify.md).

The source is read in key-ordered chunks, each in a consistent snapshot between two binlog
positions (the snapshot's window machinery, :mod:`changestream.snapshot.reader`); once the
sink holds everything up to the end of a chunk's window, the mirror's rows of the chunk's
keys are read at one of its snapshots, and compared value by value in the sink's own
representation. Keys the binlog changed between the chunk's read and the mirror's state
(followed by a replica connection of its own, :mod:`.changed_keys`) are left out: either
side may be the newer one. What is left and differs is reported by key.
"""
