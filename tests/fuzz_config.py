"""Fuzz target of the configuration loader (:mod:`tests.fuzzing`): the documented
``config/changestream.toml`` mutated (bytes, lines, values and keys of every TOML type,
nesting), environment overrides, ``--sink-option`` pairs and ``--source`` URLs. Each must
end in a one-line :class:`ConfigError` or a configuration the router can use: its settings
made, its source URL read, and no number the router cannot take (a duration that is not
finite, a server id wider than the protocol's four bytes)."""

from __future__ import annotations

import dataclasses
import math
import random
import re
from pathlib import Path
from typing import Any

from changestream.cli.run import sink_options
from changestream.runtime.config import Config, load_config
from changestream.runtime.settings import RouterSettings
from changestream.sources.source_url import parse_source_url
from tests.fuzz_mutators import mutate
from tests.fuzzing import Case

DEFAULT_FILE = Path(__file__).resolve().parents[1] / "config" / "changestream.toml"
_KEY_LINE = re.compile(rb"^([A-Za-z_]+) = (.*)$", re.M)

TOML_VALUES = (
    "0", "-1", "1", "2147483648", "4294967296", "9223372036854775807", "-9223372036854775808",
    "0x7fffffff", "1_000", "nan", "inf", "-inf", "1e308", "-0.0", "1e-300", "true", "false",
    '""', '"x"', '"\\u0000"', '"a\\nb"', '"\\t"', '"é"', '"' + "a" * 5000 + '"',
    '"mysql://root@127.0.0.1:0"', '"file:///nonexistent"', '"caught-up"', '"gtid:"',
    '"gtid:abc"', '"f:1"', '":"', '"a:99999999999999999999"', '"verify-ca"', '"debug"',
    "[]", "[1]", '["a", 1]', "[[]]", '[""]', '["a\\nb"]', '["a:1", ":"]', "{}", "{a = 1}",
    '{mode = "verify-ca"}', "1979-05-27T07:32:00Z", "1979-05-27", "07:32:00",
    "[" * 3000 + "]" * 3000, "{a = " * 500 + "1" + "}" * 500,
)
TOML_KEYS = ('"a\\nb"', '"\\u0000"', "x", '"source"', "url.x", '"é"', "a.b.c", '""')
ENV_TEXTS = ("", " ", "nan", "inf", "-inf", "-1", "0", "99999999999999999999", "1e3", "true",
             "yes", "maybe", "a,b", ",", "mysql://h:1", "[::1", "gtid:x", "caught-up")
SINK_PAIRS = ("a=b", "=b", "a", "a.b=c", "..=", "a.=x", ".a=x", "a=", "a.b.c=d", "é=\n",
              "a=b=c")
URLS = ("mysql://user:pass@127.0.0.1:3306", "mysql://[::1", "mysql://h:-1",
        "mysql://h:99999", "file://", "mysql://%ff@h", "mysql://h:3306/db?x#y", "MYSQL://h",
        "mysql://:@:1", "mariadb://h\u2100", "file:///nonexistent\x00", "mysql://[::1]:1",
        "mysql://h:0", "mysql://u@", "file://host/x")


def _fields(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(section.key, value)`` of every setting of a configuration."""
    out = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.extend(_fields(value, f"{prefix}{f.name}."))
        else:
            out.append((f"{prefix}{f.name}", value))
    return out


ENV_NAMES = (*("CHANGESTREAM_" + key.upper().replace(".", "_") for key, _ in _fields(Config())),
             "CHANGESTREAM_SOURCE_TLS", "CHANGESTREAM_NOPE")


class UnusableConfigError(Exception):
    """An accepted configuration holds what the router cannot take."""


def check_usable(config: Config) -> None:
    """Raise :class:`UnusableConfigError` for a number the router cannot take."""
    for key, value in _fields(config):
        if isinstance(value, float) and not (math.isfinite(value) and value >= 0):
            raise UnusableConfigError(f"accepted {key} = {value}")
    if not 0 < config.source.server_id < 1 << 32:
        raise UnusableConfigError(f"accepted source.server_id = {config.source.server_id}")


class ConfigTarget:
    """Mutated configuration files, environments, sink options and source URLs."""

    def __init__(self) -> None:
        self.text = DEFAULT_FILE.read_bytes()
        offset = 0
        self.lines = []
        for line in self.text.split(b"\n"):
            self.lines.append((offset, len(line) + 1))
            offset += len(line) + 1
        self.keys = list(_KEY_LINE.finditer(self.text))

    def case(self, rng: random.Random) -> Case:
        done: list[str] = []
        text = self.text
        kind = rng.random()
        if kind < 0.35:
            text, done = mutate(rng, text, self.lines)
        elif kind < 0.85:
            for _ in range(rng.choice((1, 1, 2, 3))):
                line = rng.choice(self.keys)
                if rng.random() < 0.8:
                    value = rng.choice(TOML_VALUES).encode()
                    new = line.group(1) + b" = " + value
                    done.append(f"{line.group(1).decode()} = {value[:40].decode()}")
                else:
                    key = rng.choice(TOML_KEYS).encode()
                    new = key + b" = " + line.group(2)
                    done.append(f"key {line.group(1).decode()} renamed {key.decode()}")
                text = text.replace(line.group(0), new, 1)
        env = {rng.choice(ENV_NAMES): rng.choice(ENV_TEXTS)
               for _ in range(rng.choice((0, 0, 1, 2)))}
        pairs = [rng.choice(SINK_PAIRS) for _ in range(rng.choice((0, 1, 2, 3)))]
        url = rng.choice(URLS) if rng.random() < 0.3 else None
        if url is not None and rng.random() < 0.5:
            url = mutate(rng, url.encode(), [])[0].decode("utf-8", "replace")
        done += [f"env {k}={v!r}" for k, v in env.items()]
        done += [f"sink option {p!r}" for p in pairs]
        if url is not None:
            done.append(f"source {url!r}")
        return Case(text, "config/changestream.toml", "; ".join(done) or "unchanged",
                    {"env": env, "pairs": pairs, "url": url})

    def run(self, case: Case, scratch: Path) -> int:
        path = scratch / "changestream.toml"
        path.write_bytes(case.data)
        url = case.options["url"]
        overrides = {"source.url": url} if url is not None else None
        config = load_config(path, env=case.options["env"], overrides=overrides)
        config.sink.options.update(sink_options(case.options["pairs"]))
        RouterSettings.from_config(config)
        parse_source_url(config.source.url)
        check_usable(config)
        return 1
