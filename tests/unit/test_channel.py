"""The channel between the router and its helper processes: objects arrive whole, and
data sent beside the pickle arrives as a read-only view of the receiver's own buffer."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from changestream.parallel.channel import Channel, beside_the_pickle


def _pair() -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    return Channel(a), Channel(b)


def _through(obj: Any) -> Any:
    """``obj`` sent on one end of a channel and received on the other (a thread sends:
    a big message fills the socket's buffer before the receiver reads)."""
    sender, receiver = _pair()
    try:
        thread = threading.Thread(target=sender.send, args=(obj,))
        thread.start()
        got = receiver.recv()
        thread.join()
        return got
    finally:
        sender.close()
        receiver.close()


def test_objects_arrive_whole() -> None:
    small = {"a": [1, 2.5, "x", b"y" * 10], "b": None}
    assert _through(small) == small
    big = os.urandom(3 << 20)
    assert _through(("plain bytes", big)) == ("plain bytes", big)


def test_data_beside_the_pickle_arrives_as_a_read_only_view_in_order() -> None:
    first, second = os.urandom(200_000), os.urandom(5 << 20)
    got = _through({"first": beside_the_pickle(first), "n": 7,
                    "second": [beside_the_pickle(second)]})
    assert got["n"] == 7
    for view, sent in ((got["first"], first), (got["second"][0], second)):
        assert isinstance(view, memoryview) and view.readonly
        assert bytes(view) == sent


def test_small_data_stays_inside_the_pickle_as_bytes() -> None:
    small = b"z" * 1000
    assert beside_the_pickle(small) is small
    assert _through([beside_the_pickle(small)]) == [small]


def test_a_closed_end_is_eof() -> None:
    sender, receiver = _pair()
    sender.close()
    try:
        receiver.recv()
    except EOFError:
        pass
    else:
        raise AssertionError("recv on a closed channel returned")
    finally:
        receiver.close()
