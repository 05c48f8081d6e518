"""Node configuration (helenus.yaml with Cassandra's keys): settings Helenus cannot honour stop
the node at start instead of being ignored (issue 33: a node asked for authentication or TLS
served anyone in plain text), and keys it does not act on are reported in one warning line.
Helenus-only: each test starts its own node."""

import socket
import subprocess

import pytest

from util import default_helenus_bin, new_session

pytestmark = pytest.mark.helenus_only

# How long a node that refuses its config may take to exit.
REFUSAL_TIMEOUT_S = 30

# A password in a refused setting: never echoed.
PASSWORD = "s3cret-pw"

# Cassandra 5.0 settings whose effect is security, set to ask for it: (key, YAML value).
SECURITY_SETTINGS = {
    "authenticator": ("authenticator", "PasswordAuthenticator"),
    "authenticator-5.0-form": (
        "authenticator", "\n  class_name: org.apache.cassandra.auth.PasswordAuthenticator"),
    "authorizer": ("authorizer", "CassandraAuthorizer"),
    "role_manager": ("role_manager", "com.example.LdapRoleManager"),
    "network_authorizer": ("network_authorizer", "CassandraNetworkAuthorizer"),
    "cidr_authorizer": ("cidr_authorizer", "CassandraCIDRAuthorizer"),
    "internode_authenticator": ("internode_authenticator", "com.example.CertificateAuthenticator"),
    "client_encryption_options": (
        "client_encryption_options",
        f"\n  enabled: true\n  keystore: conf/.keystore\n  keystore_password: {PASSWORD}"),
    "client_encryption_options-optional": ("client_encryption_options", "\n  optional: true"),
    "server_encryption_options": ("server_encryption_options", "\n  internode_encryption: all"),
    "transparent_data_encryption_options": (
        "transparent_data_encryption_options", "\n  enabled: true"),
    "audit_logging_options": ("audit_logging_options", "\n  enabled: true"),
    "native_transport_port_ssl": ("native_transport_port_ssl", "9142"),
}


def refused(node):
    """Runs the node's server on its config, expecting it to exit: the CompletedProcess."""
    node.write_config()
    return subprocess.run(
        [str(default_helenus_bin()), "server", "--config", str(node.config_path)],
        capture_output=True, text=True, timeout=REFUSAL_TIMEOUT_S,
    )


def port_is_closed(node):
    with socket.socket() as s:
        return s.connect_ex((node.host, node.port)) != 0


@pytest.mark.parametrize("setting", list(SECURITY_SETTINGS), ids=list(SECURITY_SETTINGS))
def test_a_security_setting_helenus_lacks_stops_the_node(node_factory, setting):
    key, value = SECURITY_SETTINGS[setting]
    node = node_factory(extra_config={key: value})
    result = refused(node)
    assert result.returncode != 0
    assert f"'{key}: " in result.stderr, result.stderr
    assert "which Helenus does not support yet; the node does not start" in result.stderr
    assert PASSWORD not in result.stderr
    # It stopped before opening storage or listening.
    assert "Starting listening" not in result.stderr
    assert not (node.directory / "data").exists()
    assert port_is_closed(node)


def test_settings_asking_for_no_security_are_accepted(node_factory):
    # Cassandra's own defaults: nothing to refuse, nothing to warn about.
    node = node_factory(extra_config={
        "authenticator": "\n  class_name: org.apache.cassandra.auth.AllowAllAuthenticator",
        "authorizer": "AllowAllAuthorizer",
        "role_manager": "CassandraRoleManager",
        "network_authorizer": "AllowAllNetworkAuthorizer",
        "cidr_authorizer": "\n  class_name: AllowAllCIDRAuthorizer",
        "client_encryption_options": "\n  enabled: false\n  keystore: conf/.keystore",
        "server_encryption_options": "\n  internode_encryption: none",
        "transparent_data_encryption_options": "\n  enabled: false",
        "audit_logging_options": "\n  enabled: false",
    }).start()
    with new_session(node.host, node.port) as s:
        assert s.execute("SELECT release_version FROM system.local").one() is not None
    node.stop()
    assert " WARN " not in node.log_path.read_text()


def test_keys_helenus_does_not_act_on_make_one_warning_line(node_factory):
    node = node_factory(extra_config={
        "concurrent_counter_writes": 32,
        "concurrent_reads": 32,
        "request_timeout": "10000ms",
        "frobnicate": 1,
    }).start()
    node.stop()
    warnings = [line for line in node.log_path.read_text().splitlines() if " WARN " in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].endswith(
        "Cassandra config keys Helenus accepts but does not act on: concurrent_counter_writes, "
        "concurrent_reads, request_timeout; unknown config keys: frobnicate (ignored)")


def test_a_bad_timeout_stops_the_node_naming_the_key(node_factory):
    result = refused(node_factory(extra_config={"read_request_timeout": "0ms"}))
    assert result.returncode != 0
    assert "invalid value for 'read_request_timeout': a timeout must be positive" in result.stderr


@pytest.mark.parametrize("snitch, expected", [
    # SimpleSnitch places every node in datacenter1, rack1, whatever dc and rack say.
    ("SimpleSnitch", ("datacenter1", "rack1")),
    ("org.apache.cassandra.locator.GossipingPropertyFileSnitch", ("dc-east", "rack-7")),
])
def test_the_snitch_places_the_node(node_factory, snitch, expected):
    node = node_factory(extra_config={"endpoint_snitch": snitch, "dc": "dc-east", "rack": "rack-7"})
    node.start()
    with new_session(node.host, node.port) as s:
        row = s.execute("SELECT data_center, rack FROM system.local").one()
        assert (row.data_center, row.rack) == expected
        # NetworkTopologyStrategy's shorthand expands to this node's data centre.
        s.execute("CREATE KEYSPACE snitch_ks WITH replication = "
                  "{'class': 'NetworkTopologyStrategy', 'replication_factor': 1}")
        replication = s.execute("SELECT replication FROM system_schema.keyspaces "
                                "WHERE keyspace_name = 'snitch_ks'").one().replication
        assert replication[expected[0]] == "1"
        s.execute("CREATE TABLE snitch_ks.t (k int PRIMARY KEY)")
        s.execute("INSERT INTO snitch_ks.t (k) VALUES (1)")
        assert s.execute("SELECT k FROM snitch_ks.t").one().k == 1


def test_gossiping_property_file_snitch_reads_cassandra_rackdc_properties(node_factory):
    # As Cassandra: the file beside the config file names the data centre and rack.
    node = node_factory(extra_config={"endpoint_snitch": "GossipingPropertyFileSnitch"})
    node.directory.mkdir(parents=True, exist_ok=True)
    rackdc = node.directory / "cassandra-rackdc.properties"
    rackdc.write_text("# this node's place\ndc=dc-west\nrack=rack-3\n")
    node.start()
    with new_session(node.host, node.port) as s:
        row = s.execute("SELECT data_center, rack FROM system.local").one()
        assert (row.data_center, row.rack) == ("dc-west", "rack-3")
    node.stop()
    # Without a rack the node does not start, in Cassandra's words.
    rackdc.write_text("dc=dc-west\n")
    result = refused(node)
    assert result.returncode != 0
    assert "DC or rack not found in snitch properties" in result.stderr, result.stderr


def test_initial_token_is_taken_at_the_first_start_and_kept(node_factory):
    node = node_factory(extra_config={"num_tokens": 2, "initial_token": "'-4611686018427387904,42'"})
    node.start()
    with new_session(node.host, node.port) as s:
        tokens = s.execute("SELECT tokens FROM system.local").one().tokens
    assert set(tokens) == {"-4611686018427387904", "42"}
    node.stop()
    # A later start keeps them, whatever initial_token says now.
    node.extra_config["initial_token"] = "'7,8'"
    node.start()
    with new_session(node.host, node.port) as s:
        assert set(s.execute("SELECT tokens FROM system.local").one().tokens) == set(tokens)


def test_initial_token_must_match_num_tokens(node_factory):
    result = refused(node_factory(extra_config={"initial_token": "'1,2,3'"}))
    assert result.returncode != 0
    assert "initial_token was set but num_tokens is not!" in result.stderr, result.stderr
    assert "Starting listening" not in result.stderr
