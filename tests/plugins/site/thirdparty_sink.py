"""A sink adapter written as a third party would: it imports nothing from changestream
but the documented interface (open/write/close and the batch it is given)."""

from __future__ import annotations

import csv
import json
import os


class CsvFileSink:
    """Writes one CSV line per change: transaction id, seq, op, table, after-image JSON."""

    def __init__(self, path: str | None = None, **options: object):
        if not path:
            raise ValueError("csvfile sink needs a path: csvfile:PATH")
        self.path = path
        self.options = options
        self._file = None

    def open(self):
        self._file = open(self.path, "a", newline="")  # noqa: SIM115 (open until close)
        return None

    def write(self, batch):
        writer = csv.writer(self._file)
        for change in batch.iter_changes():
            writer.writerow([change.transaction.id, change.seq, change.op,
                             f"{change.database}.{change.table}",
                             json.dumps(change.after, default=str, sort_keys=True)])
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self):
        if self._file is not None:
            self._file.close()
