"""``changestream verify``: a mirror compared with its source table while both run, without
locks (docs/verify.md).

The source is read in key-ordered chunks, each in a consistent snapshot between two binlog
positions (:mod:`changestream.snapshot.reader`); once the sink holds everything up to a
chunk's window's end, the mirror's rows of the chunk's keys are read at one of its
snapshots and compared value by value in the sink's representation. Keys the binlog changed
meanwhile (followed by a replica connection of its own, :mod:`.changed_keys`) are left out:
either side may be the newer one. What is left and differs is reported by key."""
