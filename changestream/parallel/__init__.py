"""Decode workers: plain DML transactions decoded, assembled and encoded in other
processes, in segments the listener cuts."""
