"""The snapshot's progress line."""

from __future__ import annotations

import io
import time

from changestream.runtime.progress_bar import ProgressBar, render


def test_the_line_says_tables_rows_and_share() -> None:
    line = render({"finished": False, "tables_done": 1, "tables_total": 4, "rows": 2500,
                   "rows_estimated": 10000, "current_table": "shop.orders"})
    assert line == ("snapshot [#######.......................]  25%  tables 1/4  "
                    "rows 2,500/~10,000  shop.orders")
    assert "100%" in render({"finished": True, "tables_done": 4, "tables_total": 4,
                             "rows": 9000, "rows_estimated": 10000})


def test_the_bar_is_redrawn_until_the_snapshot_is_finished() -> None:
    states = iter([{}, {"snapshot": {"finished": False, "rows": 5, "rows_estimated": 10,
                                     "tables_done": 0, "tables_total": 1}}]
                  + [{"snapshot": {"finished": True, "rows": 10, "rows_estimated": 10,
                                   "tables_done": 1, "tables_total": 1}}] * 100)
    out = io.StringIO()
    bar = ProgressBar(lambda: next(states), out, interval=0.01)
    bar.start()
    deadline = time.monotonic() + 5
    while not out.getvalue().endswith("\n") and time.monotonic() < deadline:
        time.sleep(0.01)
    bar.stop()
    drawn = out.getvalue()
    assert drawn.count("\r") == 2 and " 50%" in drawn and "100%" in drawn
