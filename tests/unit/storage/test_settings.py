"""settings.py: which Spark (Hadoop) setting or environment variable configures each store client,
and that no value of one is ever shown (pure: explicit environments, no client is made)."""

import pickle

import pytest

from sparkdl.storage.settings import StoreSettings, azure_options, gcs_options, is_secret, s3_options

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
