"""A fuzz target that misbehaves on purpose, case by case, for the harness's own test
(tests/unit/test_fuzz_harness.py): 0 and 6 end cleanly, 1 hangs, 2 kills its process,
3 takes a gigabyte, 4 raises an IndexError, 5 a BinlogError that says not where."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from changestream.model.errors import BinlogError
from tests.fuzzing import Case


class MisbehavingTarget:
    def case(self, rng: random.Random) -> Case:
        return Case(b"", "probe", "none")

    def run(self, case: Case, scratch: Path) -> int:
        if case.index == 1:
            time.sleep(60)
        elif case.index == 2:
            os.abort()
        elif case.index == 3:
            return len(bytearray(1 << 30))
        elif case.index == 4:
            return b""[1]
        elif case.index == 5:
            raise BinlogError("corrupt event")
        return 0
