"""The private test servers start, and write ROW binlogs with full row metadata."""

from __future__ import annotations

import pytest

from changestream.devserver import EmbeddedMariaDB, EmbeddedServer

pytestmark = pytest.mark.integration

BINLOG_MAGIC = b"\xfebin"


def test_server_is_configured_for_change_capture(server: EmbeddedServer) -> None:
    [(log_bin, binlog_format, row_image, row_metadata)] = server.execute(
        "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata"
    )
    assert (log_bin, binlog_format, row_image, row_metadata) == (1, "ROW", "FULL", "FULL")


def test_mysql_has_gtids_on_and_root_over_tcp(mysql: EmbeddedServer) -> None:
    [(gtid_mode, user)] = mysql.execute("SELECT @@gtid_mode, CURRENT_USER()")
    assert gtid_mode == "ON"
    assert user.startswith("root@")


def test_binlog_position_advances_with_writes(server: EmbeddedServer, fresh_database: str) -> None:
    file_before, position_before = server.binlog_position()
    server.execute(
        [
            f"CREATE TABLE `{fresh_database}`.t (id INT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO `{fresh_database}`.t VALUES (1, 'one'), (2, 'two')",
        ]
    )
    file_after, position_after = server.binlog_position()
    assert (file_after, position_after) > (file_before, position_before)

    files = server.binlog_files()
    assert files[-1].name == file_after
    assert all(path.parent == server.binlog_dir for path in files)
    assert files[-1].read_bytes()[:4] == BINLOG_MAGIC
    assert files[-1].stat().st_size >= position_after


def test_binlog_files_follow_the_index_after_a_rotation(server: EmbeddedServer) -> None:
    before = server.binlog_files()
    server.execute("FLUSH BINARY LOGS")
    after = server.binlog_files()
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    assert after[-1].name > before[-1].name


def test_extra_options_override_the_defaults() -> None:
    options = {"binlog_row_metadata": "MINIMAL", "binlog_checksum": "NONE"}
    with EmbeddedMariaDB(options=options) as server:
        assert server.execute("SELECT @@binlog_row_metadata, @@binlog_checksum") == [
            ("MINIMAL", "NONE")
        ]
        assert server.url == f"mariadb://root@127.0.0.1:{server.port}"
        base_dir = server.base_dir
    assert not server.running
    assert not base_dir.exists()


def test_a_stopped_server_starts_again_on_the_same_data() -> None:
    with EmbeddedMariaDB() as server:
        server.execute(["CREATE DATABASE kept", "CREATE TABLE kept.t (id INT)"])
        server.stop()
        assert not server.running
        server.start()
        assert server.execute("SHOW TABLES FROM kept") == [("t",)]
        assert len(server.binlog_files()) == 2


def test_options_that_shape_the_data_files_make_the_template_so() -> None:
    # The template is made with the server's own redo log size (a copy of the default
    # 96 MB one would be resized at every start), and so is each server's copy.
    with EmbeddedMariaDB(options={"innodb_log_file_size": "8M"}) as server:
        assert server.execute("SELECT @@innodb_log_file_size") == [(8 * 1024 * 1024,)]
        template = server._template()
        assert (template / "ib_logfile0").stat().st_size == 8 * 1024 * 1024
    with EmbeddedMariaDB() as default:
        assert default._template() != template
