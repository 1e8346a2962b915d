"""Self-check of pg_server.PgServer (the PostgreSQL the cluster tests run on):
initdb, start, a database, SQL through psql, restart and crash keep the data,
stop, cleanup. Needs no harnessd binary."""

from __future__ import annotations

import os
import socket

import pytest

from pg_server import HOST, PgServer


@pytest.fixture(autouse=True)
def _require_binary():
    """Overrides conftest's: this file does not run harnessd."""


def test_pg_server_lifecycle():
    server = PgServer()
    try:
        assert server.running() and server.pid
        assert server.url() == f"postgresql://harnessd@127.0.0.1:{server.port}/harnessd"
        assert server.psql("select current_user, current_database()") == ["harnessd|harnessd"]
        if os.geteuid() == 0:
            owner = server.psql("select setting from pg_settings where name = 'data_directory'")[0]
            assert os.stat(owner).st_uid != 0, "postgres must not run as root"

        url = server.create_database("selfcheck")
        assert url.endswith(f":{server.port}/selfcheck")
        server.psql("create table t(id int primary key, v text); insert into t values (1, 'a|b'), (2, 'ü');",
                    db="selfcheck")
        assert server.psql("select id, v from t order by id", db="selfcheck") == ["1|a|b", "2|ü"]
        with pytest.raises(AssertionError, match="psql failed"):
            server.psql("insert into t values (1, 'dup')", db="selfcheck")

        port, pid = server.port, server.pid
        server.restart()
        assert server.port == port and server.pid != pid and server.running()
        assert server.psql("select count(*) from t", db="selfcheck") == ["2"]

        server.kill()  # immediate: recovery on the next start
        assert not server.running()
        with socket.socket() as s:
            assert s.connect_ex((HOST, port)) != 0, "port still open after kill"
        server.start()
        server.psql("insert into t values (3, 'c')", db="selfcheck")
        assert server.psql("select max(id) from t", db="selfcheck") == ["3"]
        assert "database system is ready to accept connections" in server.log()

        server.stop()
        assert not server.running()
    finally:
        server.cleanup()
    assert not server.root.exists(), "cleanup leaves the data directory behind"
