"""The driver's door to Spark (``driver/spark_access.py``) without a cluster: Spark Connect or
classic, and the address the coordinator binds and advertises."""

from __future__ import annotations

import pytest

from sparkdl.common.roles import NodeRole
from sparkdl.driver import spark_access as sa
from sparkdl.driver.coordinator import Coordinator
from sparkdl.transport.channel import Endpoint, connect, new_secret


def test_anything_but_a_spark_context_or_session_is_refused_by_name():
    with pytest.raises(TypeError, match="SparkContext or a SparkSession.*got str"):
        sa.spark_access("local[2]")


def test_a_connect_session_is_told_apart_by_its_type_not_by_global_state():
    class FakeConnectSession:  # a stand-in: only the module name matters to the check
        pass

    FakeConnectSession.__module__ = "pyspark.sql.connect.session"
    assert sa.is_connect(FakeConnectSession())
    assert isinstance(sa.spark_access(FakeConnectSession()), sa.ConnectSpark)
    assert not sa.is_connect(object())


def test_the_coordinator_advertises_this_machines_route_toward_the_server(monkeypatch):
    monkeypatch.delenv(sa.DRIVER_HOST_ENV, raising=False)
    assert sa._route_toward("localhost") == "127.0.0.1"
    assert sa._route_toward("127.0.0.1") == "127.0.0.1"


def test_sparkdl_driver_host_overrides_the_advertised_address(monkeypatch):
    monkeypatch.setenv(sa.DRIVER_HOST_ENV, "127.0.0.5")

    class Session:
        client = None

    Session.__module__ = "pyspark.sql.connect.session"
    assert sa.ConnectSpark(Session()).coordinator_addresses() == ("127.0.0.5", "127.0.0.5")


def test_an_rdd_or_pandas_frame_under_connect_is_refused_naming_its_type():
    import pandas as pd

    with pytest.raises(TypeError, match=r"pandas\.core\.frame\.DataFrame: under Spark Connect there are no RDDs"):
        sa.ConnectSpark(None).require_frames(pd.DataFrame({"a": [1]}), "cluster.train")


#: An address from TEST-NET-3 (RFC 5737): never one of this machine's, like a NAT's public address.
PUBLIC = "203.0.113.7"


class ConnectSession:
    """A stand-in Connect session: only its module name and its (absent) client matter here."""

    client = None


ConnectSession.__module__ = "pyspark.sql.connect.session"


class ClassicWithConf(sa.ClassicSpark):
    """A ClassicSpark whose Spark configuration is a dict (everything else is the real class)."""

    def __init__(self, conf: dict[str, str]):
        super().__init__(sc=None)
        self._conf = conf

    def conf(self, key: str) -> str | None:
        return self._conf.get(key)


@pytest.fixture(autouse=True)
def no_address_settings(monkeypatch):
    monkeypatch.delenv(sa.DRIVER_HOST_ENV, raising=False)
    monkeypatch.delenv("SPARKDL_DRIVER_BIND_ADDRESS", raising=False)


def test_a_connect_client_behind_nat_binds_locally_and_advertises_its_public_address(monkeypatch):
    monkeypatch.setenv(sa.DRIVER_HOST_ENV, PUBLIC)
    monkeypatch.setenv("SPARKDL_DRIVER_BIND_ADDRESS", "0.0.0.0")
    bind, advertise = sa.ConnectSpark(ConnectSession()).coordinator_addresses()
    assert (bind, advertise) == ("0.0.0.0", PUBLIC)
    # The real coordinator starts on those addresses (binding the public one would fail: it is not
    # this machine's), tells nodes the public address, and accepts a node's handshake locally.
    secret = new_secret()
    coordinator = Coordinator([NodeRole(0, "chief", 0)], secret, bind, advertise_host=advertise, cluster_id="nat")
    try:
        host, port = coordinator.address
        assert host == PUBLIC
        with connect(("127.0.0.1", port), secret, timeout=10, endpoint=Endpoint.coordinator("nat")):
            pass
    finally:
        coordinator.close()


def test_a_connect_client_binds_its_advertised_address_by_default(monkeypatch):
    monkeypatch.setenv(sa.DRIVER_HOST_ENV, "127.0.0.5")
    assert sa.ConnectSpark(ConnectSession()).coordinator_addresses() == ("127.0.0.5", "127.0.0.5")


def test_a_classic_driver_binds_the_sparkdl_setting_over_spark_driver_bind_address(monkeypatch):
    spark = ClassicWithConf({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.2"})
    assert spark.coordinator_addresses() == ("127.0.0.2", "127.0.0.1")
    monkeypatch.setenv(sa.DRIVER_HOST_ENV, PUBLIC)
    monkeypatch.setenv("SPARKDL_DRIVER_BIND_ADDRESS", "0.0.0.0")
    assert spark.coordinator_addresses() == ("0.0.0.0", PUBLIC)


def test_a_classic_driver_binds_its_advertised_address_when_nothing_is_set():
    assert ClassicWithConf({"spark.driver.host": "127.0.0.1"}).coordinator_addresses() == ("127.0.0.1", "127.0.0.1")
