"""``changestream snapshot DB.TABLE ...`` and ``changestream tables add|pause|resume
DB.TABLE ...``: requests to a running router through its control endpoint (``POST
/snapshot``, ``POST /tables``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import orjson

EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE = 0, 2, 3


def add_parser(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="ask a running router (its control endpoint) for a "
                       "snapshot of tables")
    p.add_argument("tables", nargs="+", metavar="DB.TABLE",
                   help="tables (patterns like shop.*) in the router's scope")
    p.add_argument("--where", metavar="CONDITION",
                   help="read only the rows this SQL condition holds for (e.g. \"id > 1000\")")
    _endpoint_arguments(p)
    p.set_defaults(func=cmd_snapshot)
    p = sub.add_parser("tables", help="add tables to, pause or resume tables in, the set a "
                       "running router delivers (through its control endpoint)")
    p.add_argument("action", choices=("add", "pause", "resume"),
                   help="add: deliver them from now on (after a snapshot); pause: stop "
                        "delivering them; resume: deliver paused ones again (after a snapshot)")
    p.add_argument("tables", nargs="+", metavar="DB.TABLE",
                   help="tables (patterns like shop.* too)")
    p.add_argument("--no-snapshot", action="store_true",
                   help="add or resume without reading the tables first (their rows from "
                        "before are not delivered)")
    _endpoint_arguments(p)
    p.set_defaults(func=cmd_tables)


def _endpoint_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--control-port", type=int, required=True,
                   help="the router's control endpoint port (on 127.0.0.1)")
    p.add_argument("--token-env", default="CHANGESTREAM_CONTROL_TOKEN",
                   help="environment variable holding the endpoint's token, if it has one")


def _post(command: str, args: argparse.Namespace, path: str, body: dict[str, Any]
          ) -> dict[str, Any] | int:
    """The endpoint's answer to ``body`` on ``path`` (202), else the exit code, the error
    printed."""
    import http.client  # here: only these commands talk HTTP

    token = os.environ.get(args.token_env)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", args.control_port, timeout=60)
    try:
        conn.request("POST", path, orjson.dumps(body), headers)
        response = conn.getresponse()
        answer = orjson.loads(response.read() or b"{}")
    except (OSError, http.client.HTTPException, orjson.JSONDecodeError) as exc:
        print(f"changestream {command}: no control endpoint on 127.0.0.1:{args.control_port}"
              f" ({exc}); start the router with --control-port", file=sys.stderr)
        return EXIT_UNREACHABLE
    finally:
        conn.close()
    if response.status != 202:
        error = str(answer.get("error", response.reason)).removeprefix(f"{command}: ")
        print(f"changestream {command}: {error}", file=sys.stderr)
        return EXIT_REFUSED
    return dict(answer)


def _started(snapshot: dict[str, Any]) -> str:
    where = f" where {snapshot['where']}" if snapshot.get("where") else ""
    return (f"snapshot {snapshot['snapshot']} started: {', '.join(snapshot['tables'])}{where} "
            f"(about {snapshot['rows_estimated']:,} rows); GET /status shows its progress")


def cmd_snapshot(args: argparse.Namespace) -> int:
    answer = _post("snapshot", args, "/snapshot", {"tables": args.tables, "where": args.where})
    if isinstance(answer, int):
        return answer
    print(_started(answer))
    return EXIT_OK


def cmd_tables(args: argparse.Namespace) -> int:
    answer = _post("tables", args, "/tables", {"action": args.action, "tables": args.tables,
                                               "snapshot": not args.no_snapshot})
    if isinstance(answer, int):
        return answer
    tables = answer["tables"]
    print(f"tables {args.action}: {', '.join(args.tables)}, from the next transaction on "
          f"(added: {', '.join(tables['added']) or 'none'}; paused: "
          f"{', '.join(tables['paused']) or 'none'})")
    if answer.get("snapshot"):
        print(_started(answer["snapshot"]))
    return EXIT_OK
