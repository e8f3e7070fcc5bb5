"""A real S3-protocol server for the storage tests: moto's server, checking credentials as AWS does.

:class:`S3Server` starts ``python -m moto.server`` on a free port of 127.0.0.1 (``local_server.py``)
with IAM authentication on (``INITIAL_NO_AUTH_ACTION_COUNT``: the first requests, which create the IAM
user and its key, pass unsigned; every later one must be signed with a key that exists and carries the
user's policy), so wrong credentials get ``AccessDenied`` and a missing bucket ``NoSuchBucket``, as
on AWS. ``env`` holds the standard AWS variables a user would set to reach it; ``conftest.py`` puts
them in ``os.environ`` for the session (executors inherit them), and ``client`` is a boto3 client
with the good keys, for tests that look at the store behind sparkdl's back.
"""

from __future__ import annotations

import importlib.util
import json
import sys

from local_server import LocalServer, unique_name

#: Unsigned requests moto lets through before it checks credentials: the IAM user, its policy, its
#: key, and one spare (a retried bootstrap request); the bucket is then created with the key.
BOOTSTRAP_REQUESTS = 4
REGION = "us-east-1"
USER = "sparkdl"
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def installed() -> bool:
    """Whether moto is installed (its server: ``moto[server]``, from the ``dev`` extra)."""
    return importlib.util.find_spec("moto") is not None


class S3Server(LocalServer):
    """moto's S3 server on ``endpoint`` (``http://127.0.0.1:<port>``) with one IAM user whose key is
    ``access_key``/``secret_key``, and a bucket ``bucket`` made at start."""

    def __init__(self, bucket: str = "sparkdl-tests"):
        super().__init__("moto's server")
        self.endpoint = f"http://{self.authority}"
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        with self._serving(command, {"INITIAL_NO_AUTH_ACTION_COUNT": str(BOOTSTRAP_REQUESTS)}):
            self.access_key, self.secret_key = self._bootstrap_user()
            self.secrets = (self.secret_key,)
            self.env = {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": REGION,
            }
            self.client = self._client("s3", self.access_key, self.secret_key)
            self.bucket = self.new_bucket(bucket)

    def url(self, key: str, bucket: str | None = None) -> str:
        """``s3://<bucket>/<key>`` (the default bucket unless ``bucket`` is given)."""
        return f"s3://{bucket or self.bucket}/{key.lstrip('/')}"

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name when ``name`` is None) and return its name."""
        name = name or unique_name()
        self.client.create_bucket(Bucket=name)
        return name

    def files_under(self, url: str) -> list[str]:
        """Every object under the ``s3://`` directory ``url``, relative to it, as moto lists them (boto3,
        behind sparkdl's back), less the empty ``dir/`` objects pyarrow leaves as directory markers when
        it deletes a directory's content."""
        bucket, _, key = url.split("://", 1)[1].partition("/")
        key = key.rstrip("/")
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key + "/")
        keys = (item["Key"][len(key) + 1 :] for page in pages for item in page.get("Contents", []))
        return sorted(name for name in keys if name and not name.endswith("/"))

    def _bootstrap_user(self) -> tuple[str, str]:
        """Create the IAM user, its allow-all policy and its key (unsigned requests): the key."""
        iam = self._client("iam", "bootstrap", "bootstrap")
        iam.create_user(UserName=USER)
        iam.put_user_policy(UserName=USER, PolicyName="all", PolicyDocument=json.dumps(ALLOW_ALL))
        key = iam.create_access_key(UserName=USER)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def _client(self, service: str, access_key: str, secret_key: str):
        """A boto3 client of ``service`` on this server (few retries, short timeouts: a test fails fast)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"}),
        )
