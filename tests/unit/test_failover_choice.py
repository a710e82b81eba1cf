"""Failover between the servers of a source's set, without servers: the URL that names
them, the comparison of GTIDs a server must have, the configuration key."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.model.errors import ConfigError, ConnectionLostError
from changestream.model.gtid import MysqlGtidSet
from changestream.model.gtid_coverage import lacking, mariadb_lacking, mysql_lacking
from changestream.runtime.config import load_config, mask_url
from changestream.runtime.settings import RouterSettings
from changestream.sources.failover import NoServerError, ServerSet, server_problem
from changestream.sources.source_url import parse_source_url, point_at

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_a_url_names_several_servers_in_order() -> None:
    spec = parse_source_url("mariadb://repl:pw@db1:3307,db2,[::1]:3308")
    assert spec.hosts == (("db1", 3307), ("db2", 3306), ("::1", 3308))
    assert spec.connection == {"host": "db1", "port": 3307, "user": "repl", "password": "pw"}
    assert spec.describe() == "mariadb://repl@db1:3307,db2:3306,::1:3308"
    assert spec.server == "db1:3307"
    point_at(spec, "db2", 3306)
    assert (spec.connection["host"], spec.connection["port"], spec.connection["user"]) == \
        ("db2", 3306, "repl")
    assert spec.server == "db2:3306"


def test_a_url_with_one_server_is_as_before() -> None:
    spec = parse_source_url("mysql://root@127.0.0.1", password="secret")
    assert spec.hosts == (("127.0.0.1", 3306),)
    assert spec.connection["password"] == "secret"
    assert spec.describe() == "mysql://root@127.0.0.1:3306"


@pytest.mark.parametrize(("url", "words"), [
    ("mysql://u@db1,", "an empty host in the list of servers"),
    ("mysql://u@db1,,db2", "an empty host"),
    ("mysql://u@db1:3306,db1", "a server is named twice"),
    ("mysql://u@db1,db2:x", "the port is not a number"),
    ("mysql://u@db1,db2/x", "several servers take no path"),
    ("mysql://u@db1,[x]", "not a URL"),
])
def test_a_bad_list_of_servers_is_a_one_line_config_error(url: str, words: str) -> None:
    with pytest.raises(ConfigError, match=r"^source") as error:
        parse_source_url(url)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_the_password_of_a_list_of_servers_is_masked() -> None:
    assert mask_url("mysql://u:secret@db1:3306,db2:3306") == "mysql://u:***@db1:3306,db2:3306"


def test_a_gtid_set_difference() -> None:
    a = MysqlGtidSet(f"{U1}:1-10:20-30,{U2}:1-5,{U1}:tag:1-3")
    b = MysqlGtidSet(f"{U1}:3-4:9-22,{U1}:tag:2")
    assert a.difference(b).render() == f"{U1}:1-2:5-8:23-30:tag:1:3,{U2}:1-5"
    assert not MysqlGtidSet(f"{U1}:1-5").difference(MysqlGtidSet(f"{U1}:1-9"))
    assert MysqlGtidSet("").difference(b).render() == ""


def test_mysql_coverage_compares_executed_and_purged_sets() -> None:
    assert mysql_lacking(f"{U1}:1-10", f"{U1}:1-12,{U2}:1-3") == ""
    assert mysql_lacking(f"{U1}:1-12", f"{U1}:1-10") == f"lacks {U1}:11-12"
    assert mysql_lacking(f"{U1}:1-10,{U2}:1", f"{U1}:1-10") == f"lacks {U2}:1"
    assert mysql_lacking(f"{U1}:1-10", f"{U1}:1-20", f"{U1}:1-12") == \
        f"has purged {U1}:11-12, which was not delivered"
    assert mysql_lacking(f"{U1}:1-10", f"{U1}:1-20", f"{U1}:1-10") == ""


def test_mariadb_coverage_compares_each_domain() -> None:
    assert mariadb_lacking("0-1-10", "0-1-10") == ""
    assert mariadb_lacking("0-1-10", "0-2-12") == ""  # promoted: it wrote on after 10
    assert mariadb_lacking("0-1-10,1-1-5", "0-1-11,1-3-9") == ""
    assert mariadb_lacking("0-1-10", "0-1-9") == "lacks 0-1-10 (it is at 0-1-9)"
    assert mariadb_lacking("0-1-10,1-1-5", "0-1-10") == "lacks 1-1-5 (nothing of domain 1)"
    assert "another history" in mariadb_lacking("0-1-10", "0-2-10")


def test_coverage_refuses_the_other_flavours_form() -> None:
    assert "not in its form" in lacking("0-1-3", mariadb=False, executed=f"{U1}:1-3")
    assert "not in its form" in lacking(f"{U1}:1-3", mariadb=True, executed="0-1-3")


def test_a_server_without_its_binlog_or_replica_updates_cannot_take_over() -> None:
    mysql = {"version": "9.7.0", "log_bin": "ON", "log_replica_updates": "ON",
             "gtid_mode": "ON", "gtid_executed": f"{U1}:1-10", "gtid_purged": ""}
    assert server_problem(mysql, f"{U1}:1-10") == ""
    assert server_problem(mysql, f"{U1}:1-11") == f"lacks {U1}:11"
    assert "binary log off" in server_problem({**mysql, "log_bin": "OFF"}, f"{U1}:1")
    assert "log_replica_updates off" in server_problem(
        {**mysql, "log_replica_updates": "OFF"}, f"{U1}:1")
    assert "gtid_mode OFF" in server_problem({**mysql, "gtid_mode": "OFF"}, f"{U1}:1")
    mariadb = {"version": "10.11.9-MariaDB", "log_bin": "ON", "log_slave_updates": "ON",
               "gtid_binlog_pos": "0-1-7"}
    assert server_problem(mariadb, "0-1-7") == ""
    assert server_problem(mariadb, "0-1-8") == "lacks 0-1-8 (it is at 0-1-7)"
    assert "log_slave_updates off" in server_problem(
        {**mariadb, "log_slave_updates": "OFF"}, "0-1-7")


def test_the_failover_wait_is_a_config_key() -> None:
    assert load_config().failover.wait_seconds == 30.0
    config = load_config(env={"CHANGESTREAM_FAILOVER_WAIT_SECONDS": "2.5"})
    assert RouterSettings.from_config(config).failover.wait_seconds == 2.5
    with pytest.raises(ConfigError, match=r"^failover\.wait_seconds: must be a non-negative"):
        load_config(overrides={"failover.wait_seconds": -1})
    with pytest.raises(ConfigError, match=r"^failover\.wait_seconds"):
        load_config(overrides={"failover.wait_seconds": "soon"})


class _Scripted(ServerSet):
    """A set whose servers' answers are given (``None``: it does not answer)."""

    def __init__(self, url: str, answers: dict[int, Any], wait: float = 0.0) -> None:
        super().__init__(parse_source_url(url), wait, poll_seconds=0.01)
        self.answers = answers
        self.asked: list[int] = []

    def _variables(self, host: tuple[str, int]) -> dict[str, str]:
        self.asked.append(host[1])
        answer = self.answers[host[1]]
        if callable(answer):
            answer = answer()
        if answer is None:
            raise ConnectionLostError(f"cannot connect to {host[0]}:{host[1]}: refused")
        return {"version": "10.11.9-MariaDB", "log_bin": "ON", "log_slave_updates": "ON",
                "gtid_binlog_pos": answer}


def test_the_first_server_that_answers_and_has_everything_is_taken() -> None:
    servers = _Scripted("mariadb://u@h:1,h:2,h:3", {1: None, 2: "0-1-4", 3: "0-1-9"})
    servers.start("0-1-5")
    assert servers.spec.server == "h:3"
    servers = _Scripted("mariadb://u@h:1,h:2", {1: None, 2: "0-1-4"})
    servers.start(None)
    assert servers.spec.server == "h:2"


def test_after_a_loss_the_same_server_is_kept_when_it_answers() -> None:
    servers = _Scripted("mariadb://u@h:1,h:2", {1: "0-1-1", 2: "0-1-9"})
    assert servers.after_loss(lambda: pytest.fail("no GTIDs needed")) is False
    assert servers.spec.server == "h:1"
    servers.answers[1] = None
    assert servers.after_loss(lambda: "0-1-9") is True
    assert servers.spec.server == "h:2"


def test_a_lagging_server_is_waited_for_then_refused_with_one_line() -> None:
    seen = iter(["0-1-3", "0-1-3", "0-1-7"])
    servers = _Scripted("mariadb://u@h:1,h:2", {1: None, 2: lambda: next(seen)}, wait=5)
    assert servers.after_loss(lambda: "0-1-7") is True
    assert servers.asked.count(2) == 3
    servers = _Scripted("mariadb://u@h:1,h:2", {1: None, 2: "0-1-3"}, wait=0.05)
    with pytest.raises(NoServerError) as error:
        servers.after_loss(lambda: "0-1-7")
    message = str(error.value)
    assert message == ("no server of the set has every transaction delivered after waiting "
                       "0.05s (GTIDs 0-1-7): h:1 does not answer (refused); "
                       "h:2 lacks 0-1-7 (it is at 0-1-3)")
    assert servers.spec.server == "h:1"


def test_no_server_answering_is_a_lost_connection() -> None:
    servers = _Scripted("mariadb://u@h:1,h:2", {1: None, 2: None}, wait=5)
    with pytest.raises(ConnectionLostError, match="no server of the set answers"):
        servers.after_loss(lambda: "0-1-7")
    with pytest.raises(NoServerError, match="no GTIDs were delivered"):
        _Scripted("mariadb://u@h:1,h:2", {1: None, 2: "0-1-1"}).after_loss(lambda: "")


def test_a_set_of_servers_resumes_a_mariadb_position_by_its_gtid_state() -> None:
    from changestream.model.changes import Position
    from changestream.runtime.start_point import start_point

    saved = Position("mariadb-bin.000003", 1082, "0-1-57", "mariadb")
    settings = RouterSettings(source="mariadb://u@db1")

    def no_server() -> Any:
        raise AssertionError("a resume asks no server")

    one = start_point(saved, settings, parse_source_url("mariadb://u@db1"), "never", no_server)
    assert (one[1].kind, one[1].file, one[1].pos) == ("file", "mariadb-bin.000003", 1082)
    two = start_point(saved, settings, parse_source_url("mariadb://u@db1,db2"), "never",
                      no_server)
    assert (two[1].kind, two[1].gtid) == ("gtid", "0-1-57")
    assert two[0] is not None and two[0].render() == "0-1-57"


def test_a_position_without_gtids_resumes_only_on_the_first_server() -> None:
    servers = _Scripted("mariadb://u@h:1,h:2", {1: "", 2: "0-1-9"})
    servers.start("")
    assert servers.spec.server == "h:1"
    servers = _Scripted("mariadb://u@h:1,h:2", {1: None, 2: "0-1-9"})
    with pytest.raises(NoServerError, match="the position has no GTIDs to compare"):
        servers.start("")
