"""``changestream snapshot DB.TABLE ...``: ask a running router for a snapshot of tables,
through its control endpoint (``POST /snapshot``)."""

from __future__ import annotations

import argparse
import http.client
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
    p.add_argument("--control-port", type=int, required=True,
                   help="the router's control endpoint port (on 127.0.0.1)")
    p.add_argument("--token-env", default="CHANGESTREAM_CONTROL_TOKEN",
                   help="environment variable holding the endpoint's token, if it has one")
    p.set_defaults(func=cmd_snapshot)


def cmd_snapshot(args: argparse.Namespace) -> int:
    token = os.environ.get(args.token_env)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", args.control_port, timeout=60)
    try:
        conn.request("POST", "/snapshot", orjson.dumps({"tables": args.tables}), headers)
        response = conn.getresponse()
        body = orjson.loads(response.read() or b"{}")
    except (OSError, http.client.HTTPException, orjson.JSONDecodeError) as exc:
        print(f"changestream snapshot: no control endpoint on 127.0.0.1:{args.control_port}"
              f" ({exc}); start the router with --control-port", file=sys.stderr)
        return EXIT_UNREACHABLE
    finally:
        conn.close()
    if response.status != 202:
        error = str(body.get("error", response.reason)).removeprefix("snapshot: ")
        print(f"changestream snapshot: {error}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"snapshot {body['snapshot']} started: {', '.join(body['tables'])} (about "
          f"{body['rows_estimated']:,} rows); GET /status shows its progress")
    return EXIT_OK
