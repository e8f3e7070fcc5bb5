"""A real S3-protocol server for the storage tests: moto's server, checking credentials as AWS does.

:class:`S3Server` starts ``python -m moto.server`` on a free port of 127.0.0.1 with IAM
authentication on (``INITIAL_NO_AUTH_ACTION_COUNT``: the first requests, which create the IAM user
and its key, pass unsigned; every later one must be signed with a key that exists and carries the
user's policy), so wrong credentials get ``AccessDenied`` and a missing bucket ``NoSuchBucket``, as
on AWS. ``env`` holds the standard AWS variables a user would set to reach it; ``conftest.py`` puts
them in ``os.environ`` for the session (executors inherit them), and ``client`` is a boto3 client
with the good keys, for tests that look at the store behind sparkdl's back.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid

from sparkdl.node import watchdog

#: Unsigned requests moto lets through before it checks credentials: the IAM user, its policy, its
#: key, and one spare (a retried bootstrap request); the bucket is then created with the key.
BOOTSTRAP_REQUESTS = 4
#: Seconds the server has to start listening and answer the bootstrap, in all.
START_DEADLINE_S = 30.0
#: Seconds between two looks at a starting server.
POLL_INTERVAL_S = 0.05
#: Seconds a stopping server has to exit before it is killed.
STOP_DEADLINE_S = 10.0
REGION = "us-east-1"
USER = "sparkdl"
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


class S3Server:
    """moto's S3 server on ``endpoint`` (``http://127.0.0.1:<port>``) with one IAM user whose key is
    ``access_key``/``secret_key``, and a bucket ``bucket`` made at start. :meth:`stop` ends it; so does
    the end of the thread that made it (the parent-death signal: make it on a thread that outlives its use)."""

    def __init__(self, bucket: str = "sparkdl-tests"):
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(BOOTSTRAP_REQUESTS)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=watchdog.die_with_parent,  # a test run killed outright leaves no server behind
        )
        try:
            self._wait_until_listening(time.monotonic() + START_DEADLINE_S)
            self.access_key, self.secret_key = self._bootstrap_user()
            self.env = {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": REGION,
            }
            self.client = self._client("s3", self.access_key, self.secret_key)
            self.bucket = self.new_bucket(bucket)
        except BaseException:
            self.stop()
            raise

    def url(self, key: str) -> str:
        """``s3://<bucket>/<key>`` in the default bucket."""
        return f"s3://{self.bucket}/{key.lstrip('/')}"

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name when ``name`` is None) and return its name."""
        name = name or f"sparkdl-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after :data:`STOP_DEADLINE_S`) and reap it."""
        if self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(STOP_DEADLINE_S)

    def _wait_until_listening(self, deadline: float) -> None:
        """Poll the port until the server accepts a connection (a bare TCP connection is no request,
        so it spends none of the bootstrap's unsigned ones)."""
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto's server exited with {self._process.returncode} before listening")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    message = f"moto's server did not listen on {self.endpoint} within {START_DEADLINE_S} s"
                    raise RuntimeError(message) from None
                time.sleep(POLL_INTERVAL_S)  # a poll interval, not a synchronisation

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


def _free_port() -> int:
    """A port of 127.0.0.1 free right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
