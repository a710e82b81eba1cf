"""Snapshots: the rows a table already holds, read in key-ordered chunks while the binlog
streams, each chunk between two binlog positions (its window) so that the changes the
binlog holds for the chunk's keys win over what the chunk read (the watermark algorithm of
DBLog and Debezium's incremental snapshots)."""
