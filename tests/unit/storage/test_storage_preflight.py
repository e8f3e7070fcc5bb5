"""storage/preflight.py: every store path a run will use is checked before any node starts, against real
store servers (``s3_store``: moto, checking credentials; ``azure_store``: Azurite; ``gcs_store``:
gcp-storage-emulator; ``any_store``: each in turn): a good path passes and leaves nothing behind; a
missing bucket, a refused key, an unreachable endpoint or an unknown scheme is one StorageError within
seconds, naming the path and never a secret. And ``paths_in`` finds the store paths in a run's ``tf_args``."""

import argparse
import json
import time
import uuid

import pytest

from sparkdl.common.errors import StorageError
from sparkdl.storage import StoreSettings
from sparkdl.storage.preflight import check, paths_in

pytestmark = pytest.mark.timeout(60)

#: A refused path must be reported within this many seconds (one attempt, short connect timeout).
FAST_S = 10.0
WRONG_SECRET = "wrong-secret-" + "q" * 27
#: A well-formed account key Azurite does not hold.
WRONG_AZURE_KEY = "d3Jvbmcta2V5LW9mLXRoZS1yaWdodC1sZW5ndGgtZm9yLWFuLWF6dXJlLWtleSEhIQ=="
#: The other spellings of a store's scheme that name the same place: ``s3a://`` for ``s3://``, ...
OTHER_SPELLINGS = {"s3://": ("s3a://",), "abfss://": ("abfs://",)}


def refused(paths, settings=None, write=True) -> str:
    """The message of the StorageError ``check`` raises for ``paths``, asserted to come within FAST_S."""
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        check(paths, settings, write=write)
    elapsed = time.monotonic() - started
    assert elapsed < FAST_S, f"check took {elapsed:.1f} s"
    return str(caught.value)


def assert_no_secret(message: str, server) -> None:
    """No secret of ``server``'s (nor a wrong one a test set) is in ``message``."""
    for secret in (*server.secrets, WRONG_SECRET, WRONG_AZURE_KEY, "AccountKey="):
        assert secret not in message


def test_a_good_path_passes_and_leaves_no_probe(any_store):
    run = f"runs/{uuid.uuid4().hex[:8]}"
    path = any_store.url(f"{run}/model")
    scheme = path.split("://", 1)[0] + "://"
    spellings = [path.replace(scheme, other, 1) for other in OTHER_SPELLINGS.get(scheme, ())]
    started = time.monotonic()
    check([path, *spellings, "/local/paths/are/the/nodes/to/check"])
    assert time.monotonic() - started < FAST_S
    assert any_store.files_under(any_store.url(run)) == []  # the probe came and went


def test_a_new_bucket_is_usable_at_once(any_store):
    check([any_store.url("m", any_store.new_bucket())])


def test_a_missing_bucket_is_named(any_store):
    path = any_store.url("model", f"no-such-bucket-{uuid.uuid4().hex[:8]}")
    message = refused([path])
    assert path in message and "does not exist" in message
    assert any(name in message for name in any_store.env)  # the variable that led to the store
    assert_no_secret(message, any_store)


def test_a_wrong_secret_in_the_spark_settings_is_refused(s3_store):
    path = s3_store.url("x/model")
    settings = StoreSettings.from_mapping(
        {"spark.hadoop.fs.s3a.access.key": s3_store.access_key, "spark.hadoop.fs.s3a.secret.key": WRONG_SECRET}
    )
    message = refused([path], settings)
    assert path in message and "refused the credentials from fs.s3a.access.key" in message
    assert_no_secret(message, s3_store)


def test_a_wrong_secret_in_the_environment_is_refused(s3_store, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET)
    path = s3_store.url("x/model")
    message = refused([path])
    assert path in message and "refused the credentials" in message
    assert_no_secret(message, s3_store)


def test_an_unknown_access_key_is_refused(s3_store, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIANOSUCHKEY0000000")
    message = refused([s3_store.url("x/model")])
    assert s3_store.url("x/model") in message and "refused the credentials" in message
    assert_no_secret(message, s3_store)


def test_read_only_credentials_fail_the_write_probe(s3_store):
    """A user that may list and read the bucket but not write: refused only when ``write`` is asked."""
    # moto checks a HEAD of the bucket as an action of its own (AWS asks s3:ListBucket for it)
    access_key, secret_key = _user_with_policy(s3_store, ["s3:ListBucket", "s3:HeadBucket", "s3:GetObject"])
    settings = StoreSettings.from_mapping({"fs.s3a.access.key": access_key, "fs.s3a.secret.key": secret_key})
    path = s3_store.url("readonly/model")
    check([path], settings, write=False)
    message = refused([path], settings)
    assert path in message and "cannot be written" in message
    assert secret_key not in message


@pytest.mark.parametrize("where", ["settings", "environment"])
def test_an_unreachable_endpoint_is_named(where, s3_store, monkeypatch):
    settings = None
    if where == "settings":
        settings = StoreSettings.from_mapping({"fs.s3a.endpoint": "http://127.0.0.1:1"})
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    path = s3_store.url("x/model")
    message = refused([path], settings)
    assert path in message and "cannot reach endpoint http://127.0.0.1:1" in message
    assert_no_secret(message, s3_store)


@pytest.mark.parametrize("path", ["foo://bucket/model", "s3a:///model"])
def test_a_path_no_store_serves_is_named(path, s3_store):
    message = refused([s3_store.url("fine"), path])
    assert path in message


# -- paths_in --


def test_paths_in_finds_store_paths_in_dicts_namespaces_and_nested_lists():
    args = {
        "model_dir": "s3a://b/models",
        "epochs": 3,
        "data": ["/local/data", ("gs://b/data", ["hdfs://nn:8020/logs", None])],
        "nested": {"export": "abfss://c@acct.dfs.core.windows.net/e", "again": "s3a://b/models"},
        "local": "file:///tmp/x",
        "plain": "not a path",
    }
    assert paths_in(args) == [
        "s3a://b/models", "gs://b/data", "hdfs://nn:8020/logs", "abfss://c@acct.dfs.core.windows.net/e",
    ]  # fmt: skip
    namespace = argparse.Namespace(checkpoint="s3://b/ckpt", sizes=[1, 2], sub=argparse.Namespace(out="S3A://b/o"))
    assert paths_in(namespace) == ["s3://b/ckpt", "S3A://b/o"]
    assert paths_in([namespace, {"x": "gs://b/x"}]) == ["s3://b/ckpt", "S3A://b/o", "gs://b/x"]


def test_paths_in_ignores_local_paths_and_other_objects():
    assert paths_in(None) == [] and paths_in("relative/dir") == [] and paths_in(object()) == []
    assert paths_in({"a": "/abs", "b": "file:/x", "c": b"s3://bytes-are-no-path"}) == []
    assert paths_in("s3a://b/k") == ["s3a://b/k"]


def test_paths_in_is_bounded_on_cycles_depth_and_count():
    loop: list = ["s3://b/one"]
    loop.append(loop)
    assert paths_in(loop) == ["s3://b/one"]
    deep: object = "s3://b/deep"
    for _ in range(10):
        deep = [deep]
    assert paths_in(deep) == []  # deeper than any tf_args a user writes
    many = [f"s3://b/{n}" for n in range(200)]
    assert paths_in(many, limit=5) == many[:5]


def _user_with_policy(s3_store, actions: list[str]) -> tuple[str, str]:
    """A new IAM user of the server allowed only ``actions``: its access key and secret."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=s3_store.endpoint,
        region_name="us-east-1",
        aws_access_key_id=s3_store.access_key,
        aws_secret_access_key=s3_store.secret_key,
    )
    name = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


# -- Azure (Azurite, reached through AZURE_STORAGE_CONNECTION_STRING alone) --


@pytest.mark.parametrize("where", ["settings", "environment"])
def test_azure_a_wrong_account_key_is_refused(where, azure_store, monkeypatch):
    settings = None
    if where == "settings":
        host = f"{azure_store.account}.dfs.core.windows.net"
        settings = StoreSettings.from_mapping({f"spark.hadoop.fs.azure.account.key.{host}": WRONG_AZURE_KEY})
        setting = f"fs.azure.account.key.{host}"
    else:
        connection = azure_store.env["AZURE_STORAGE_CONNECTION_STRING"].replace(
            azure_store.account_key, WRONG_AZURE_KEY
        )
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
        setting = "AZURE_STORAGE_CONNECTION_STRING"
    path = azure_store.url("x/model")
    message = refused([path], settings)
    assert path in message and setting in message and "403" in message
    assert_no_secret(message, azure_store)
