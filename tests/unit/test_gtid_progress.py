"""GTID progress as the router keeps it: MySQL GTID sets (tags included) and MariaDB GTID
states, parsed, extended one transaction at a time, and rendered for a saved position."""

from __future__ import annotations

import pytest

from changestream.model.gtid import (
    MariadbGtidState,
    MysqlGtidSet,
    is_mariadb_gtid,
    parse_gtid_progress,
)

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "a67ccd29-e56b-11f1-b171-02fc00000001"


# -- MySQL: parsing and rendering ----------------------------------------------------------


@pytest.mark.parametrize("text", [
    "",
    f"{A}:1",
    f"{A}:1-5",
    f"{A}:1-5:7:9-12",
    f"{A}:1-5,{B}:3",
    f"{A}:mytag:1-3",
    f"{A}:1-5:mytag:1-3",
    f"{A}:1-5:alpha:2:beta:4-6,{B}:1",
])
def test_mysql_set_renders_as_it_was_written(text: str) -> None:
    assert MysqlGtidSet(text).render() == text
    assert str(MysqlGtidSet(text)) == text


def test_mysql_set_normalises_case_whitespace_and_order() -> None:
    text = f" {B.upper()}:3 ,\n{A}:MyTag:1-2:4 , {A}:7:1-5 "
    assert MysqlGtidSet(text).render() == f"{A}:1-5:7:mytag:1-2:4,{B}:3"


def test_mysql_uuid_without_dashes_is_accepted() -> None:
    assert MysqlGtidSet(A.replace("-", "") + ":1-2").render() == f"{A}:1-2"


def test_mysql_set_merges_overlapping_and_adjacent_intervals_when_parsed() -> None:
    assert MysqlGtidSet(f"{A}:5-7:1-3:4:10-12:11-20").render() == f"{A}:1-7:10-20"
    assert MysqlGtidSet(f"{A}:1-5,{A}:3-9").render() == f"{A}:1-9"


def test_a_tag_may_have_32_characters() -> None:
    tag = "_" + "t" * 31
    assert MysqlGtidSet(f"{A}:{tag}:1").render() == f"{A}:{tag}:1"


def test_untagged_and_tagged_gnos_are_kept_apart() -> None:
    s = MysqlGtidSet(f"{A}:1-3:tag:4-5")
    assert f"{A}:2" in s
    assert f"{A}:tag:2" not in s
    assert f"{A}:tag:4" in s
    assert f"{A}:4" not in s


@pytest.mark.parametrize("text", [
    "not-a-uuid:1",
    f"{A}:",
    f"{A}:1-",
    f"{A}:x1-2",
    f"{A}:1-a",
    f"{A}:5-3",  # an interval must not run backwards
    f"{A}:0",  # GNOs start at 1
    f"{A}:tag:0-4",
    f"{A}:bad-tag:1",  # tags are letters, digits and underscores
    f"{A}:{'t' * 33}:1",  # of at most 32 characters
])
def test_malformed_mysql_sets_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        MysqlGtidSet(text)


# -- MySQL: adding transactions ------------------------------------------------------------


def test_adding_the_next_gno_extends_the_last_interval() -> None:
    s = MysqlGtidSet(f"{A}:1-5")
    s.add(f"{A}:6")
    s.add(f"{A}:7")
    assert s.render() == f"{A}:1-7"


def test_adding_a_gno_already_in_the_set_changes_nothing() -> None:
    s = MysqlGtidSet(f"{A}:1-5:8")
    s.add(f"{A}:3")
    s.add(f"{A}:8")
    assert s.render() == f"{A}:1-5:8"


def test_adding_after_a_gap_starts_a_new_interval() -> None:
    s = MysqlGtidSet(f"{A}:1-5")
    s.add(f"{A}:9")
    assert s.render() == f"{A}:1-5:9"


def test_adding_the_gno_that_fills_a_gap_joins_the_two_intervals() -> None:
    s = MysqlGtidSet(f"{A}:1-5:7-9")
    s.add(f"{A}:6")
    assert s.render() == f"{A}:1-9"


def test_adding_a_gno_out_of_order_keeps_intervals_sorted_and_merged() -> None:
    s = MysqlGtidSet()
    for gno in (10, 3, 1, 2, 11, 5, 4, 20):
        s.add(f"{A}:{gno}")
    assert s.render() == f"{A}:1-5:10-11:20"
    s.add(f"{A}:7")
    assert s.render() == f"{A}:1-5:7:10-11:20"


def test_adding_a_gno_just_below_the_first_interval_extends_it() -> None:
    s = MysqlGtidSet(f"{A}:5-9")
    s.add(f"{A}:4")
    assert s.render() == f"{A}:4-9"


def test_adding_gtids_of_a_new_server_and_a_new_tag() -> None:
    s = MysqlGtidSet(f"{A}:1-5")
    s.add(f"{B}:1")
    s.add(f"{A}:MyTag:1")
    s.add(f"{A}:mytag:2")
    assert s.render() == f"{A}:1-5:mytag:1-2,{B}:1"


def test_membership() -> None:
    s = MysqlGtidSet(f"{A}:1-5:9")
    assert f"{A}:1" in s and f"{A}:5" in s and f"{A}:9" in s
    assert f"{A}:6" not in s and f"{A}:10" not in s
    assert f"{A.upper()}:3" in s
    assert f"{B}:1" not in s


def test_a_copy_is_independent_of_the_original() -> None:
    s = MysqlGtidSet(f"{A}:1-5:7")
    c = s.copy()
    assert c == s and c is not s
    c.add(f"{A}:6")
    c.add(f"{B}:1")
    assert s.render() == f"{A}:1-5:7"
    assert c.render() == f"{A}:1-7,{B}:1"
    s.add(f"{A}:8")
    assert c.render() == f"{A}:1-7,{B}:1"


def test_equality_ignores_how_the_set_was_written() -> None:
    assert MysqlGtidSet(f"{A}:1-3:4,{B}:1") == MysqlGtidSet(f"{B}:1,{A}:1-4")
    assert MysqlGtidSet(f"{A}:1-3") != MysqlGtidSet(f"{A}:1-4")
    assert MysqlGtidSet(f"{A}:1-3") != f"{A}:1-3"


# -- MariaDB -------------------------------------------------------------------------------


def test_mariadb_state_round_trips_sorted_by_domain() -> None:
    assert MariadbGtidState("0-1-42").render() == "0-1-42"
    assert MariadbGtidState("2-5-7, 0-1-42,1-1-3").render() == "0-1-42,1-1-3,2-5-7"
    assert MariadbGtidState("").render() == ""


def test_mariadb_add_replaces_the_last_gtid_of_its_domain_only() -> None:
    s = MariadbGtidState("0-1-42,1-1-3")
    s.add("0-2-43")
    assert s.render() == "0-2-43,1-1-3"
    s.add("5-1-1")
    assert s.render() == "0-2-43,1-1-3,5-1-1"


def test_mariadb_membership_is_by_sequence_within_the_domain() -> None:
    s = MariadbGtidState("0-1-42")
    assert "0-1-42" in s and "0-1-1" in s
    assert "0-1-43" not in s
    assert "1-1-1" not in s


def test_mariadb_copy_is_independent() -> None:
    s = MariadbGtidState("0-1-42")
    c = s.copy()
    assert c == s
    c.add("0-1-43")
    assert s.render() == "0-1-42" and c.render() == "0-1-43"
    assert s != c


@pytest.mark.parametrize("text", ["0-1", "0-1-2-3", "a-b-c", "0-1-x"])
def test_malformed_mariadb_gtids_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="MariaDB GTID"):
        MariadbGtidState(text)


# -- flavour -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "mariadb"), [
    ("0-1-42", True),
    ("0-1-42,1-2-3", True),
    (" 10-200-3000 ", True),
    (f"{A}:1-5", False),
    (f"{A}:1", False),
    ("", False),
    ("0-1", False),
])
def test_is_mariadb_gtid(text: str, mariadb: bool) -> None:
    assert is_mariadb_gtid(text) is mariadb


def test_parse_gtid_progress_guesses_the_flavour() -> None:
    assert isinstance(parse_gtid_progress("0-1-42"), MariadbGtidState)
    assert isinstance(parse_gtid_progress(f"{A}:1-3"), MysqlGtidSet)
    assert isinstance(parse_gtid_progress(""), MysqlGtidSet)
    assert parse_gtid_progress(f"{A}:1-3").render() == f"{A}:1-3"


def test_parse_gtid_progress_follows_the_given_flavour() -> None:
    empty = parse_gtid_progress("", mariadb=True)
    assert isinstance(empty, MariadbGtidState)
    empty.add("0-1-1")
    assert empty.render() == "0-1-1"
    assert isinstance(parse_gtid_progress("", mariadb=False), MysqlGtidSet)


def test_add_all_is_adding_each_in_order() -> None:
    gtids = ["0-1-5", "1-2-7", "0-1-6", "0-3-7", "2-1-1", "1-2-8"]
    one_by_one, at_once = MariadbGtidState("0-1-4"), MariadbGtidState("0-1-4")
    for gtid in gtids:
        one_by_one.add(gtid)
    at_once.add_all(gtids)
    assert at_once == one_by_one
    assert at_once.render() == "0-3-7,1-2-8,2-1-1"
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    mysql, mysql_all = MysqlGtidSet(), MysqlGtidSet()
    for gno in (1, 2, 5, 3):
        mysql.add(f"{uuid}:{gno}")
    mysql_all.add_all([f"{uuid}:{gno}" for gno in (1, 2, 5, 3)])
    assert mysql_all == mysql and mysql_all.render() == f"{uuid}:1-3:5"


def test_add_all_gives_what_adding_one_at_a_time_gives() -> None:
    """Runs of consecutive numbers are added as intervals: any order, repeats, gaps, tags,
    two servers and a UUID written in capitals give the set one add at a time gives."""
    import random

    rng = random.Random(35)
    heads = [A, B, f"{A}:tag_a", B.upper(), f"{B}:Other"]
    for _ in range(200):
        gtids, gno = [], rng.randint(1, 50)
        for _ in range(rng.randint(0, 60)):
            gno = gno + 1 if rng.random() < 0.7 else max(1, gno + rng.randint(-20, 20))
            gtids.append(f"{rng.choice(heads) if rng.random() < 0.2 else heads[0]}:{gno}")
        start = MysqlGtidSet(f"{A}:1-3:7") if rng.random() < 0.5 else MysqlGtidSet()
        one_by_one, together = start.copy(), start.copy()
        for gtid in gtids:
            one_by_one.add(gtid)
        together.add_all(gtids)
        assert together.render() == one_by_one.render(), gtids


def test_add_all_refuses_what_add_refuses() -> None:
    for bad in (["not-a-uuid:5"], [f"{A}:x"], ["5"]):
        with pytest.raises(ValueError):
            MysqlGtidSet().add_all(bad)
