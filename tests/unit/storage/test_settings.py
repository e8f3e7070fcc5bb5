"""settings.py: which Spark (Hadoop) setting or environment variable configures each store client,
and that no value of one is ever shown (pure: explicit environments, no client is made)."""

import logging
import pickle

import pytest

from sparkdl.common.errors import StorageError
from sparkdl.storage import backends, spark_conf
from sparkdl.storage.locations import parse
from sparkdl.storage.settings import (
    StoreSettings,
    azure_options,
    endpoint_region,
    gcs_options,
    is_secret,
    s3_options,
)

pytestmark = pytest.mark.timeout(60)

SECRET = "sEcReT-value-1234567890"


def settings(**values: str) -> StoreSettings:
    """StoreSettings from Hadoop names written with ``_`` for ``.`` (``fs_s3a_endpoint``)."""
    return StoreSettings.from_mapping({name.replace("_", "."): value for name, value in values.items()})


# -- StoreSettings --


def test_from_mapping_keeps_the_store_settings_with_or_without_the_spark_hadoop_prefix():
    found = StoreSettings.from_mapping(
        {
            "spark.hadoop.fs.s3a.endpoint": "http://minio:9000",
            "fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": SECRET,
            "fs.gs.project.id": "p",
            "spark.executor.memory": "4g",  # not a store setting
            "spark.hadoop.fs.defaultFS": "hdfs://nn",  # not one sparkdl carries
            "fs.s3a.session.token": None,  # unset
        }
    )
    assert [name for name, _ in found.hadoop] == [
        "fs.azure.account.key.acct.dfs.core.windows.net",
        "fs.gs.project.id",
        "fs.s3a.endpoint",
        "fs.s3a.path.style.access",
    ]
    assert found.get("fs.s3a.endpoint") == "http://minio:9000"
    assert found.get("fs.s3a.session.token") is None and found.get("nope") is None


def test_values_are_strings_and_the_settings_pickle():
    found = StoreSettings.from_mapping({"fs.s3a.connection.maximum": 64})
    assert found.get("fs.s3a.connection.maximum") == "64"
    assert pickle.loads(pickle.dumps(found)) == found


def test_repr_shows_setting_names_never_values():
    found = StoreSettings.from_mapping({"fs.s3a.secret.key": SECRET, "fs.s3a.endpoint": "http://private-host:9000"})
    for text in (repr(found), str(found), f"{found!r}"):
        assert "fs.s3a.secret.key" in text and "fs.s3a.endpoint" in text
        assert SECRET not in text and "private-host" not in text


def test_empty_settings():
    assert StoreSettings().hadoop == () and StoreSettings().get("fs.s3a.endpoint") is None


@pytest.mark.parametrize(
    "name, secret",
    [("fs.s3a.secret.key", True), ("fs.s3a.access.key", True), ("fs.s3a.session.token", True),
     ("fs.azure.account.key.a.dfs.core.windows.net", True), ("fs.azure.sas.fixed.token", True),
     ("fs.s3a.endpoint", False), ("fs.s3a.path.style.access", False),
     ("fs.s3a.aws.credentials.provider", False), ("fs.azure.account.auth.type", False)],
)  # fmt: skip
def test_is_secret(name, secret):
    assert is_secret(name) is secret


# -- S3 --


def test_s3_per_bucket_settings_beat_global_ones_which_beat_the_environment():
    env = {"AWS_ENDPOINT_URL": "http://from-env:1", "AWS_REGION": "eu-west-1"}
    both = StoreSettings.from_mapping(
        {
            "fs.s3a.endpoint": "http://global:2",
            "fs.s3a.bucket.special.endpoint": "http://per-bucket:3",
            "fs.s3a.endpoint.region": "us-west-2",
        }
    )
    special = s3_options(both, "special", env)
    assert (special.endpoint, special.scheme, special.source) == (
        "per-bucket:3",
        "http",
        "fs.s3a.bucket.special.endpoint",
    )
    other = s3_options(both, "other", env)
    assert (other.endpoint, other.source, other.region) == ("global:2", "fs.s3a.endpoint", "us-west-2")
    plain = s3_options(StoreSettings(), "other", env)
    assert (plain.endpoint, plain.scheme, plain.source, plain.region) == (
        "from-env:1",
        "http",
        "AWS_ENDPOINT_URL",
        "eu-west-1",
    )


def test_an_empty_hadoop_setting_counts_as_unset():
    options = s3_options(settings(fs_s3a_endpoint=""), "b", {"AWS_ENDPOINT_URL": "https://env:9"})
    assert (options.endpoint, options.source) == ("env:9", "AWS_ENDPOINT_URL")


def test_aws_endpoint_url_s3_beats_aws_endpoint_url():
    env = {"AWS_ENDPOINT_URL": "http://general:1", "AWS_ENDPOINT_URL_S3": "http://s3-only:2/"}
    options = s3_options(StoreSettings(), "b", env)
    assert (options.endpoint, options.scheme, options.source) == ("s3-only:2", "http", "AWS_ENDPOINT_URL_S3")


def test_no_endpoint_anywhere_is_aws_itself():
    options = s3_options(StoreSettings(), "b", {})
    assert (options.endpoint, options.scheme, options.source, options.region) == (None, None, "", None)


@pytest.mark.parametrize(
    "ssl, scheme", [(None, "https"), ("true", "https"), ("false", "http"), ("FALSE", "http")]
)  # fmt: skip
def test_an_endpoint_without_a_scheme_is_https_unless_ssl_is_disabled(ssl, scheme):
    values = {"fs.s3a.endpoint": "minio:9000"}
    if ssl is not None:
        values["fs.s3a.connection.ssl.enabled"] = ssl
    options = s3_options(StoreSettings.from_mapping(values), "b", {})
    assert (options.endpoint, options.scheme) == ("minio:9000", scheme)


def test_the_scheme_written_in_the_endpoint_wins_over_the_ssl_setting():
    values = {"fs.s3a.endpoint": "https://minio:9000", "fs.s3a.connection.ssl.enabled": "false"}
    assert s3_options(StoreSettings.from_mapping(values), "b", {}).scheme == "https"


def test_s3_region_precedence():
    env = {"AWS_REGION": "r-env", "AWS_DEFAULT_REGION": "r-default"}
    assert s3_options(settings(fs_s3a_endpoint_region="r-ep", fs_s3a_region="r-h"), "b", env).region == "r-ep"
    assert s3_options(settings(fs_s3a_region="r-h"), "b", env).region == "r-h"
    assert s3_options(StoreSettings(), "b", env).region == "r-env"
    assert s3_options(StoreSettings(), "b", {"AWS_DEFAULT_REGION": "r-default"}).region == "r-default"


def test_s3_addressing_style():
    assert not s3_options(StoreSettings(), "b", {}).virtual_addressing
    assert s3_options(settings(fs_s3a_path_style_access="false"), "b", {}).virtual_addressing
    assert not s3_options(
        settings(fs_s3a_path_style_access="true"), "b", {"AWS_S3_ADDRESSING_STYLE": "virtual"}
    ).virtual_addressing
    assert s3_options(StoreSettings(), "b", {"AWS_S3_ADDRESSING_STYLE": "virtual"}).virtual_addressing


def test_s3_credentials_from_hadoop_else_the_sdk_chain():
    hadoop = StoreSettings.from_mapping(
        {"fs.s3a.access.key": "AKIAEXAMPLE", "fs.s3a.secret.key": SECRET, "fs.s3a.bucket.b.session.token": "tok-123456"}
    )
    options = s3_options(hadoop, "b", {"AWS_SECRET_ACCESS_KEY": "from-env"})
    assert (options.access_key, options.secret_key, options.session_token) == ("AKIAEXAMPLE", SECRET, "tok-123456")
    assert options.credentials_source == "fs.s3a.access.key"
    assert SECRET not in repr(options) and "tok-123456" not in repr(options)
    chain = s3_options(StoreSettings(), "b", {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": SECRET})
    assert (chain.access_key, chain.secret_key, chain.credentials_source) == (None, None, "")  # the SDK reads them


def test_an_anonymous_credentials_provider():
    provider = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    assert s3_options(StoreSettings.from_mapping({"fs.s3a.aws.credentials.provider": provider}), "b", {}).anonymous
    assert not s3_options(StoreSettings(), "b", {}).anonymous


def test_s3_options_read_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert s3_options(StoreSettings(), "b").endpoint == "127.0.0.1:4566"


# -- Azure --

HOST = "acct.dfs.core.windows.net"
AZURITE = (
    "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5PT0=;"
    "BlobEndpoint=http://127.0.0.1:10000/acct;QueueEndpoint=http://127.0.0.1:10001/acct;"
)


def test_azure_connection_string_parts():
    options = azure_options(StoreSettings(), HOST, {"AZURE_STORAGE_CONNECTION_STRING": AZURITE})
    assert options.account == "acct"
    assert options.account_key == "a2V5PT0="  # '=' inside a value is kept
    assert (options.blob_authority, options.dfs_authority, options.scheme) == (
        "127.0.0.1:10000",
        "127.0.0.1:10000",
        "http",
    )
    assert options.source == "AZURE_STORAGE_CONNECTION_STRING"
    assert "a2V5PT0=" not in repr(options)


def test_azure_connection_string_with_a_sas_and_only_a_protocol():
    text = "DefaultEndpointsProtocol=https;AccountName=acct;SharedAccessSignature=sv=2024&sig=abc"
    options = azure_options(StoreSettings(), HOST, {"AZURE_STORAGE_CONNECTION_STRING": text})
    assert (options.account_key, options.sas_token, options.scheme, options.blob_authority) == (
        None, "sv=2024&sig=abc", "https", None,
    )  # fmt: skip


def test_a_connection_string_of_another_account_is_ignored():
    other = AZURITE.replace("AccountName=acct", "AccountName=other")
    options = azure_options(StoreSettings(), HOST, {"AZURE_STORAGE_CONNECTION_STRING": other})
    assert (options.account_key, options.blob_authority, options.source) == (None, None, "")


def test_the_hadoop_account_key_beats_the_environment():
    hadoop = StoreSettings.from_mapping({f"fs.azure.account.key.{HOST}": SECRET})
    env = {"AZURE_STORAGE_CONNECTION_STRING": AZURITE, "AZURE_STORAGE_KEY": "env-key"}
    options = azure_options(hadoop, HOST, env)
    assert (options.account_key, options.source) == (SECRET, f"fs.azure.account.key.{HOST}")
    assert options.blob_authority == "127.0.0.1:10000"  # the endpoint still comes from the connection string


def test_azure_key_and_sas_variables():
    options = azure_options(
        StoreSettings(), HOST, {"AZURE_STORAGE_ACCOUNT_KEY": "k2", "AZURE_STORAGE_SAS_TOKEN": "sig=1"}
    )
    assert (options.account_key, options.source, options.sas_token) == ("k2", "AZURE_STORAGE_ACCOUNT_KEY", "sig=1")
    first = azure_options(StoreSettings(), HOST, {"AZURE_STORAGE_KEY": "k1", "AZURE_STORAGE_ACCOUNT_KEY": "k2"})
    assert (first.account_key, first.source) == ("k1", "AZURE_STORAGE_KEY")


def test_no_azure_setting_is_the_default_credential_chain():
    options = azure_options(StoreSettings(), HOST, {})
    assert (options.account, options.account_key, options.sas_token, options.source) == ("acct", None, None, "")


# -- GCS --


@pytest.mark.parametrize(
    "emulator, endpoint, scheme",
    [("localhost:4443", "localhost:4443", "http"), ("https://gcs.local:4443/", "gcs.local:4443", "https")],
)
def test_gcs_emulator(emulator, endpoint, scheme):
    options = gcs_options({"STORAGE_EMULATOR_HOST": emulator})
    assert (options.endpoint, options.scheme, options.anonymous, options.source) == (
        endpoint, scheme, True, "STORAGE_EMULATOR_HOST",
    )  # fmt: skip


def test_gcs_without_an_emulator_is_googles_default_credentials():
    assert gcs_options({}) == gcs_options({"STORAGE_EMULATOR_HOST": ""})
    assert gcs_options({}).endpoint is None and not gcs_options({}).anonymous


# -- S3 region from an AWS endpoint --


@pytest.mark.parametrize(
    "endpoint, region",
    [("s3.eu-west-1.amazonaws.com", "eu-west-1"), ("https://s3.eu-west-1.amazonaws.com/", "eu-west-1"),
     ("s3-eu-west-1.amazonaws.com", "eu-west-1"), ("s3.dualstack.ap-southeast-2.amazonaws.com", "ap-southeast-2"),
     ("bucket.s3.us-west-2.amazonaws.com", "us-west-2"), ("s3-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
     ("s3.cn-north-1.amazonaws.com.cn", "cn-north-1"), ("S3.EU-CENTRAL-1.AMAZONAWS.COM:443", "eu-central-1"),
     ("s3.amazonaws.com", None), ("s3-external-1.amazonaws.com", None), ("minio:9000", None), (None, None),
     ("s3.eu-west-1.example.com", None)],
)  # fmt: skip
def test_endpoint_region(endpoint, region):
    assert endpoint_region(endpoint) == region


def test_an_aws_endpoint_names_the_region_a_server_of_ones_own_is_us_east_1():
    regional = s3_options(settings(fs_s3a_endpoint="s3.eu-west-1.amazonaws.com"), "b", {})
    assert (regional.endpoint, regional.region) == ("s3.eu-west-1.amazonaws.com", "eu-west-1")
    glob = s3_options(settings(fs_s3a_endpoint="s3.amazonaws.com"), "b", {})
    assert glob.region is None  # looked up from the bucket (resolve_s3_region), as with no endpoint
    assert s3_options(settings(fs_s3a_endpoint="http://minio:9000"), "b", {}).region == "us-east-1"
    # a configured region beats the endpoint's; the endpoint's beats the environment's
    configured = settings(fs_s3a_endpoint="s3.eu-west-1.amazonaws.com", fs_s3a_endpoint_region="eu-west-2")
    assert s3_options(configured, "b", {}).region == "eu-west-2"
    env = {"AWS_REGION": "us-west-1"}
    assert s3_options(settings(fs_s3a_endpoint="s3.eu-west-1.amazonaws.com"), "b", env).region == "eu-west-1"
    assert s3_options(settings(fs_s3a_endpoint="http://minio:9000"), "b", env).region == "us-west-1"


def test_the_s3_client_gets_the_endpoints_region(monkeypatch):
    made = {}

    class FakeS3:
        def __init__(self, **kwargs):
            made.update(kwargs)

    import pyarrow.fs as pafs

    monkeypatch.setattr(pafs, "S3FileSystem", FakeS3)
    monkeypatch.setattr(pafs, "resolve_s3_region", lambda bucket: pytest.fail("no lookup with a regional endpoint"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    backends.filesystem(parse("s3a://b/k"), settings(fs_s3a_endpoint="s3.eu-west-1.amazonaws.com"))
    assert made["region"] == "eu-west-1" and made["endpoint_override"] == "s3.eu-west-1.amazonaws.com"


# -- the anonymous provider --


@pytest.mark.parametrize(
    "providers, anonymous",
    [("org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider", True),
     (" software.amazon.awssdk.auth.credentials.AnonymousCredentialsProvider ,", True),
     ("org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider,"
      "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider", False),
     ("com.amazonaws.auth.EnvironmentVariableCredentialsProvider,\n"
      "  org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider", False),
     ("org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider", False)],
)  # fmt: skip
def test_anonymous_only_when_it_is_the_one_provider(providers, anonymous):
    options = s3_options(StoreSettings.from_mapping({"fs.s3a.aws.credentials.provider": providers}), "b", {})
    assert options.anonymous is anonymous


# -- Azure OAuth, SAS and clouds --

OAUTH_ENDPOINT = "https://login.microsoftonline.com/tenant-1234/oauth2/token"
CLIENT_CREDS = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"


def oauth(suffix: str = "", **extra: str) -> StoreSettings:
    values = {
        f"fs.azure.account.auth.type{suffix}": "OAuth",
        f"fs.azure.account.oauth.provider.type{suffix}": CLIENT_CREDS,
        f"fs.azure.account.oauth2.client.id{suffix}": "client-abc",
        f"fs.azure.account.oauth2.client.secret{suffix}": SECRET,
        f"fs.azure.account.oauth2.client.endpoint{suffix}": OAUTH_ENDPOINT,
    }
    values.update(extra)
    return StoreSettings.from_mapping(values)


@pytest.mark.parametrize("suffix", ["", f".{HOST}"])
def test_azure_oauth_client_credentials_are_a_service_principal(suffix):
    options = azure_options(oauth(suffix), HOST, {"AZURE_STORAGE_KEY": "env-key"})
    assert (options.client_id, options.client_secret, options.tenant_id) == ("client-abc", SECRET, "tenant-1234")
    assert options.account_key is None and options.sas_token is None  # OAuth is the auth type: no key
    assert options.source == f"fs.azure.account.oauth2.client.secret{suffix}"
    assert SECRET not in repr(options)
    kwargs = backends.azure_kwargs(options)
    assert kwargs == {"account_name": "acct", "client_id": "client-abc", "client_secret": SECRET,
                      "tenant_id": "tenant-1234"}  # fmt: skip


def test_azure_oauth_of_another_account_does_not_apply():
    options = azure_options(oauth(".other.dfs.core.windows.net"), HOST, {})
    assert (options.client_id, options.client_secret, options.tenant_id) == (None, None, None)


@pytest.mark.parametrize(
    "endpoint, tenant",
    [("https://login.microsoftonline.com/t-1/oauth2/token", "t-1"),
     ("https://login.microsoftonline.us/t-2/oauth2/v2.0/token", "t-2"),
     ("https://login.chinacloudapi.cn/t-3/oauth2/token", "t-3")],
)  # fmt: skip
def test_azure_tenant_from_the_token_endpoint(endpoint, tenant):
    hadoop = oauth(**{"fs.azure.account.oauth2.client.endpoint": endpoint})
    assert azure_options(hadoop, HOST, {}).tenant_id == tenant


def test_azure_managed_identity_client_id():
    hadoop = StoreSettings.from_mapping(
        {
            "fs.azure.account.auth.type": "OAuth",
            "fs.azure.account.oauth.provider.type": "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider",
            "fs.azure.account.oauth2.client.id": "identity-1",
        }
    )
    options = azure_options(hadoop, HOST, {})
    assert (options.client_id, options.client_secret, options.tenant_id) == ("identity-1", None, None)
    assert backends.azure_kwargs(options) == {"account_name": "acct", "client_id": "identity-1"}


def test_azure_fixed_sas_token_per_account():
    hadoop = StoreSettings.from_mapping({f"fs.azure.sas.fixed.token.{HOST}": "sv=1&sig=" + SECRET})
    options = azure_options(hadoop, HOST, {})
    assert (options.sas_token, options.source) == ("sv=1&sig=" + SECRET, f"fs.azure.sas.fixed.token.{HOST}")
    assert SECRET not in repr(options)
    assert backends.azure_kwargs(options)["sas_token"] == "sv=1&sig=" + SECRET
    keyed = StoreSettings.from_mapping({**dict(hadoop.hadoop), f"fs.azure.account.key.{HOST}": "a2V5"})
    assert azure_options(keyed, HOST, {}).sas_token is None  # a key is the credential; pyarrow takes one


@pytest.mark.parametrize(
    "host, dfs, blob",
    [("acct.dfs.core.usgovcloudapi.net", "acct.dfs.core.usgovcloudapi.net", "acct.blob.core.usgovcloudapi.net"),
     ("acct.dfs.core.chinacloudapi.cn", "acct.dfs.core.chinacloudapi.cn", "acct.blob.core.chinacloudapi.cn"),
     ("acct.blob.core.chinacloudapi.cn", "acct.dfs.core.chinacloudapi.cn", "acct.blob.core.chinacloudapi.cn"),
     ("acct.dfs.core.windows.net", None, None), ("acct.blob.core.windows.net", None, None)],
)  # fmt: skip
def test_azure_hosts_outside_the_public_cloud_are_the_endpoints(host, dfs, blob):
    options = azure_options(StoreSettings(), host, {})
    assert (options.account, options.dfs_authority, options.blob_authority) == ("acct", dfs, blob)
    kwargs = backends.azure_kwargs(options)
    assert kwargs.get("dfs_storage_authority") == dfs and kwargs.get("blob_storage_authority") == blob


def test_a_connection_strings_endpoint_beats_the_hosts():
    options = azure_options(
        StoreSettings(), "acct.dfs.core.usgovcloudapi.net", {"AZURE_STORAGE_CONNECTION_STRING": AZURITE}
    )
    assert (options.blob_authority, options.dfs_authority) == ("127.0.0.1:10000", "127.0.0.1:10000")


def test_pyarrow_takes_the_azure_arguments():
    import pyarrow.fs as pafs

    options = azure_options(oauth(), "acct.dfs.core.usgovcloudapi.net", {})
    pafs.AzureFileSystem(**backends.azure_kwargs(options))  # makes no request


# -- backends: client keys, HDFS endpoints and environment, client errors --


def test_the_client_key_tells_viewfs_from_hdfs():
    assert backends.client_key(parse("viewfs://c/a")) != backends.client_key(parse("hdfs://c/a"))
    assert backends.client_key(parse("hdfs://nn/a")) == backends.client_key(parse("hdfs://nn/b/c"))
    assert backends.client_key(parse("s3a://b/k")) == backends.client_key(parse("s3://b/j"))


@pytest.mark.parametrize(
    "path, endpoint",
    [("viewfs://cluster/a", ("viewfs://cluster", 0)), ("hdfs://nn:8020/a", ("hdfs://nn", 8020)),
     ("hdfs://ns1/a", ("hdfs://ns1", 0)), ("hdfs:///a", ("default", 0)), ("hdfs:/a", ("default", 0)),
     ("viewfs:///a", ("default", 0))],
)  # fmt: skip
def test_hdfs_endpoint_keeps_the_scheme(path, endpoint):
    assert backends.hdfs_endpoint(parse(path)) == endpoint


def fake_hadoop(directory, classpath="/opt/hadoop/etc/hadoop:/opt/hadoop/share/hadoop/common/*.jar", code=0):
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "hadoop"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {directory}/calls\necho '{classpath}'\nexit {code}\n")
    script.chmod(0o755)
    return script


def test_hdfs_classpath_from_the_hadoop_command_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    fake_hadoop(bin_dir)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "JAVA_HOME": "/jvm"}
    missing = backends.prepare_hdfs_environment(env)
    assert env["CLASSPATH"] == "/opt/hadoop/etc/hadoop:/opt/hadoop/share/hadoop/common/*.jar"
    assert (bin_dir / "calls").read_text().split() == ["classpath", "--glob"]
    assert len(missing) == 1 and "libhdfs.so" in missing[0]  # no native library here: still named
    backends.prepare_hdfs_environment(env)
    assert (bin_dir / "calls").read_text().count("classpath") == 1  # once: CLASSPATH now has the jars


def test_hdfs_home_gives_the_command_and_the_native_library(tmp_path):
    home = tmp_path / "hadoop"
    fake_hadoop(home / "bin")
    (home / "lib" / "native").mkdir(parents=True)
    (home / "lib" / "native" / "libhdfs.so").write_bytes(b"")
    env = {"HADOOP_HOME": str(home), "PATH": "/usr/bin:/bin", "JAVA_HOME": "/jvm", "CLASSPATH": "/app/x.jar"}
    assert backends.prepare_hdfs_environment(env) == []
    assert env["ARROW_LIBHDFS_DIR"] == str(home / "lib" / "native")
    assert env["CLASSPATH"].startswith("/app/x.jar:") and "share/hadoop" in env["CLASSPATH"]
    explicit = {**env, "ARROW_LIBHDFS_DIR": "/elsewhere"}
    backends.prepare_hdfs_environment(explicit)
    assert explicit["ARROW_LIBHDFS_DIR"] == "/elsewhere"  # the user's own is kept


def test_hdfs_without_a_hadoop_command_names_what_is_missing(tmp_path):
    env = {"PATH": str(tmp_path), "JAVA_HOME": "/jvm"}
    missing = backends.prepare_hdfs_environment(env)
    assert any("CLASSPATH" in item and "no hadoop command" in item for item in missing)
    assert "CLASSPATH" not in env
    failing = tmp_path / "failing"
    fake_hadoop(failing, classpath="", code=1)
    env = {"PATH": str(failing), "JAVA_HOME": "/jvm"}
    missing = backends.prepare_hdfs_environment(env)
    assert any("classpath --glob failed" in item for item in missing) and "CLASSPATH" not in env


def test_the_hdfs_client_is_made_with_bounded_ipc_retries(monkeypatch):
    made = {}

    class FakeHdfs:
        def __init__(self, host, port, **kwargs):
            made.update(host=host, port=port, **kwargs)

    import pyarrow.fs as pafs

    monkeypatch.setattr(pafs, "HadoopFileSystem", FakeHdfs)
    monkeypatch.setattr(backends, "prepare_hdfs_environment", lambda environ=None: [])
    backends.filesystem(parse("viewfs://cluster/a"), StoreSettings())
    assert (made["host"], made["port"]) == ("viewfs://cluster", 0)
    assert made["extra_conf"] == {"ipc.client.connect.max.retries": "3", "ipc.client.connect.timeout": "5000"}


@pytest.mark.parametrize("error", [ValueError("bad value " + SECRET), TypeError("unexpected keyword")])
def test_a_client_pyarrow_refuses_to_make_is_a_storage_error(monkeypatch, error):
    import pyarrow.fs as pafs

    def refuse(**kwargs):
        raise error

    monkeypatch.setattr(pafs, "AzureFileSystem", refuse)
    hadoop = StoreSettings.from_mapping({f"fs.azure.account.key.{HOST}": SECRET})
    with pytest.raises(StorageError) as caught:
        backends.filesystem(parse(f"abfss://c@{HOST}/m"), hadoop)
    message = str(caught.value)
    assert f"abfss://c@{HOST}/m" in message and "azure" in message and SECRET not in message


def test_an_arrow_invalid_is_a_storage_error_too(monkeypatch):
    import pyarrow as pa
    import pyarrow.fs as pafs

    def refuse(**kwargs):
        raise pa.ArrowInvalid("invalid scheme")

    monkeypatch.setattr(pafs, "S3FileSystem", refuse)
    with pytest.raises(StorageError, match="s3a://b/k.*invalid scheme"):
        backends.filesystem(parse("s3a://b/k"), settings(fs_s3a_endpoint="http://minio:9000"))


# -- spark_conf under Spark Connect --


def test_a_connect_session_whose_conf_cannot_be_read_is_warned_about(caplog):
    class Conf:
        @property
        def getAll(self):  # noqa: N802 - Spark Connect's name
            raise RuntimeError("server said no")

    Session = type("SparkSession", (), {"conf": Conf(), "__module__": "pyspark.sql.connect.session"})
    with caplog.at_level(logging.WARNING, logger="sparkdl.storage.spark_conf"):
        assert spark_conf.from_spark(Session()) == StoreSettings()
    assert any(
        record.levelno == logging.WARNING
        and "could not read the Spark Connect session's configuration" in record.getMessage()
        and "environment only" in record.getMessage()
        for record in caplog.records
    )
