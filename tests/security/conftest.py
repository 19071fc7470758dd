import pytest
from support.certs import write_tls_files
from support.tls_broker import start_tls_broker


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    """A CA, server and client certificates it signed, and bad ones (expired, foreign)."""
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def tls_broker(tls_files):
    """The test broker, reachable only over TLS with `tls_files.server_cert`."""
    broker = start_tls_broker(tls_files.server_cert, tls_files.server_key)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def sasl_broker():
    """The test broker with --authentication (SASL required of every client)."""
    from support.tls_broker import start_auth_broker

    broker = start_auth_broker()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def sasl_front_broker():
    """The test broker behind a front that checks SASL logins (PLAIN, SCRAM-SHA-256/512)
    of the users alice/wonderland and connect/connect-secret (support/sasl_proxy.py)."""
    from support.sasl_proxy import SaslBroker

    broker = SaslBroker({"alice": "wonderland", "connect": "connect-secret"})
    yield broker
    broker.stop()
