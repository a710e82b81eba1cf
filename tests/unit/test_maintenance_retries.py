"""A maintenance step that a concurrent commit got in the way of is tried again with the
table read afresh; any other failure, or one that outlasts the attempts, is an error that
names the table and the step (sinks/spark/iceberg/maintenance.py)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyarrow")  # the Spark sink's extra: maintenance imports the writer's files

from changestream.sinks.spark.iceberg import maintenance
from changestream.sinks.spark.iceberg.maintenance import (
    COMPACTION_ATTEMPTS,
    MaintenanceError,
    _retried,
)

TABLE = "`lake`.`shop`.`items`"


class Catalog:
    """Spark's ``spark.catalog``: what ``_retried`` asks of it is a table's refresh."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []

    def refreshTable(self, name: str) -> None:
        self.refreshed.append(name)


class Session:
    def __init__(self) -> None:
        self.catalog = Catalog()


class Failing:
    """A step that fails ``times`` times with ``text``, then returns ``"done"``."""

    def __init__(self, times: int, text: str) -> None:
        self.times, self.text, self.calls = times, text, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise RuntimeError(self.text)
        return "done"


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maintenance.time, "sleep", lambda seconds: None)


@pytest.mark.parametrize("text", [
    "org.apache.iceberg.exceptions.ValidationException: Cannot commit, found new position "
    "delete for replaced data file",
    "org.apache.iceberg.exceptions.CommitFailedException: metadata location changed",
    "org.apache.iceberg.shaded.org.apache.avro.AvroRuntimeException: java.io.IOException: "
    "Invalid sync!",
])
def test_a_step_a_concurrent_commit_got_in_the_way_of_is_tried_again(text: str) -> None:
    spark = Session()
    step = Failing(2, text)
    assert _retried(spark, TABLE, "compaction", step) == "done"
    assert step.calls == 3
    assert spark.catalog.refreshed == [TABLE, TABLE]


def test_any_other_failure_names_the_table_and_the_step_at_once() -> None:
    spark = Session()
    step = Failing(1, "org.apache.iceberg.shaded.org.apache.avro.InvalidAvroMagicException: "
                   "Not an Avro data file")
    with pytest.raises(MaintenanceError, match=r"^lake\.shop\.items: rewrite of manifests "
                       r"failed: org\.apache\.iceberg.*Not an Avro data file"):
        _retried(spark, TABLE, "rewrite of manifests", step)
    assert step.calls == 1 and spark.catalog.refreshed == []


def test_a_conflict_that_outlasts_the_attempts_is_an_error() -> None:
    spark = Session()
    step = Failing(COMPACTION_ATTEMPTS, "CommitFailedException: the table changed")
    with pytest.raises(MaintenanceError, match=r"^lake\.shop\.items: compaction failed: "
                       r"CommitFailedException: the table changed$"):
        _retried(spark, TABLE, "compaction", step)
    assert step.calls == COMPACTION_ATTEMPTS
    assert len(spark.catalog.refreshed) == COMPACTION_ATTEMPTS - 1


def test_a_step_that_succeeds_at_once_is_run_once() -> None:
    spark: Any = Session()
    step = Failing(0, "")
    assert _retried(spark, TABLE, "snapshot expiry", step) == "done"
    assert step.calls == 1 and spark.catalog.refreshed == []
