"""One ``pyarrow.fs`` file system per store, made from :mod:`.settings`; store errors made plain.

Why pyarrow: it is already a dependency of sparkdl (and of PySpark's Arrow path), and its one
wheel carries the C++ clients of all four stores (the AWS SDK for S3, google-cloud-cpp for GCS,
the Azure SDK for ABFS, libhdfs for HDFS), each with its SDK's own credential chain, multipart
uploads and retries. fsspec would need four more packages (s3fs with aiobotocore, gcsfs, adlfs,
and pyarrow again for HDFS) in every executor image for the same reach, and TensorFlow's own file
systems reach only local paths and ``gs://`` since tensorflow-io stopped.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..common.errors import StorageError
from ..common.timeouts import HADOOP_CLASSPATH_TIMEOUT_S, STORE_CONNECT_TIMEOUT_S
from .locations import Location
from .settings import StoreSettings, azure_options, gcs_options, s3_options

CONNECT_TIMEOUT_S = STORE_CONNECT_TIMEOUT_S
#: Attempts per request (the first and its retries) before an error is raised.
MAX_ATTEMPTS = 3
#: Hadoop IPC settings given to libhdfs: an unreachable name node fails in seconds, not minutes.
HDFS_EXTRA_CONF = {"ipc.client.connect.max.retries": "3", "ipc.client.connect.timeout": "5000"}


def client_key(location: Location) -> tuple:
    """What one client serves: the store, its scheme where that changes the client (``viewfs://``
    and ``hdfs://`` with the same authority are different file systems), the bucket (name node) and
    the account. Locations with equal keys share a client."""
    scheme = location.scheme if location.store == "hdfs" else ""
    return (location.store, scheme, location.bucket, location.account)


def filesystem_path(location: Location) -> str:
    """The path of ``location`` as its pyarrow file system names it."""
    if location.is_local or location.store == "hdfs":
        return location.key
    return f"{location.bucket}/{location.key}".rstrip("/")


def filesystem(location: Location, settings: StoreSettings, attempts: int = MAX_ATTEMPTS):
    """``(pyarrow.fs.FileSystem that reaches location, the path to give it)``; a client pyarrow refuses
    to make (a setting of the wrong form) is a :class:`StorageError` naming the path and the store."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    path = filesystem_path(location)
    try:
        return _client(pafs, location, settings, attempts), path
    except (pa.ArrowInvalid, TypeError, ValueError) as exc:
        # pyarrow's own message names the argument; it may quote a value, so sparkdl's secrets are hidden
        raise StorageError(
            f"{location.describe()}: cannot make the {location.store} client: "
            f"{_without_secrets(str(exc), settings) if str(exc) else type(exc).__name__}"
        ) from None


def _client(pafs, location: Location, settings: StoreSettings, attempts: int):
    if location.is_local:
        return pafs.LocalFileSystem()
    if location.store == "s3":
        return _s3(pafs, location, settings, attempts)
    if location.store == "gcs":
        options = gcs_options()
        # google-cloud-cpp retries for 15 minutes by default: a preflight (one attempt) gives up in seconds.
        kwargs = {"retry_time_limit": _duration(2.0 if attempts <= 1 else CONNECT_TIMEOUT_S * 12)}
        if options.endpoint:
            kwargs.update(endpoint_override=options.endpoint, scheme=options.scheme, anonymous=True)
        return pafs.GcsFileSystem(**kwargs)
    if location.store == "azure":
        return pafs.AzureFileSystem(**azure_kwargs(azure_options(settings, location.account)))
    if location.store == "hdfs":
        return _hdfs(pafs, location)
    raise StorageError(f"{location.describe()}: no file system serves this store")  # parse() refuses first


def azure_kwargs(options) -> dict:
    """``pyarrow.fs.AzureFileSystem``'s arguments for :class:`~.settings.AzureOptions` (one credential:
    a service principal, an account key, a SAS, a managed identity's client id, or the default chain)."""
    kwargs = {"account_name": options.account}
    if options.client_id and options.client_secret and options.tenant_id:
        kwargs.update(client_id=options.client_id, client_secret=options.client_secret, tenant_id=options.tenant_id)
    elif options.account_key:
        kwargs["account_key"] = options.account_key
    elif options.sas_token:
        kwargs["sas_token"] = options.sas_token
    elif options.client_id:
        kwargs["client_id"] = options.client_id
    if options.blob_authority:
        kwargs.update(blob_storage_authority=options.blob_authority, dfs_storage_authority=options.dfs_authority)
    if options.scheme:
        kwargs.update(blob_storage_scheme=options.scheme, dfs_storage_scheme=options.scheme)
    return kwargs


def _duration(seconds: float):
    import datetime

    return datetime.timedelta(seconds=seconds)


def _s3(pafs, location: Location, settings: StoreSettings, attempts: int):
    options = s3_options(settings, location.bucket)
    kwargs = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "request_timeout": CONNECT_TIMEOUT_S * 6,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=attempts),
        "force_virtual_addressing": options.virtual_addressing,
    }
    if options.endpoint:
        kwargs["endpoint_override"] = options.endpoint
    if options.scheme:
        kwargs["scheme"] = options.scheme
    if options.region:  # configured, named by an AWS endpoint, or us-east-1 for a server of one's own
        kwargs["region"] = options.region
    else:  # AWS itself (no endpoint, or its global one): where the bucket is
        region = _bucket_region(pafs, location.bucket)
        if region:
            kwargs["region"] = region
    if options.anonymous:
        kwargs["anonymous"] = True
    elif options.access_key and options.secret_key:
        kwargs.update(access_key=options.access_key, secret_key=options.secret_key)
        if options.session_token:
            kwargs["session_token"] = options.session_token
    return pafs.S3FileSystem(**kwargs)


def _bucket_region(pafs, bucket: str) -> str | None:
    """The AWS region of ``bucket`` (one unauthenticated HEAD), None when it cannot be told (the SDK's
    own region then applies)."""
    try:
        return pafs.resolve_s3_region(bucket)
    except (OSError, ValueError):
        return None


def _hdfs(pafs, location: Location):
    """HDFS through libhdfs (Hadoop's native client, loaded by pyarrow): it needs ``libhdfs.so``
    (``ARROW_LIBHDFS_DIR`` or ``HADOOP_HOME/lib/native``), a JVM (``JAVA_HOME``) and Hadoop's jars
    on ``CLASSPATH`` (``hadoop classpath --glob``, run here when a ``hadoop`` command is found), as
    every YARN node has."""
    missing = prepare_hdfs_environment()
    if missing:
        raise StorageError(
            f"{location.describe()}: HDFS is reached through Hadoop's native client, and this host lacks "
            + "; ".join(missing)
            + ". YARN nodes have them; elsewhere use an object store or a mounted path"
        )
    host, port = hdfs_endpoint(location)
    try:
        return pafs.HadoopFileSystem(host, port, extra_conf=dict(HDFS_EXTRA_CONF))
    except OSError as exc:
        raise StorageError(f"{location.describe()}: cannot connect to HDFS: {exc}") from None


def hdfs_endpoint(location: Location) -> tuple[str, int]:
    """``(host, port)`` for ``pyarrow.fs.HadoopFileSystem``: ``"default"`` (``fs.defaultFS``), or the
    name node as a URI with its scheme (``viewfs://cluster``, ``hdfs://nn`` and its port; port 0: the
    configured one), which libhdfs resolves as Hadoop does (a viewfs mount table, an HA name service)."""
    if location.bucket == "default":
        return "default", 0
    host, colon, port = location.bucket.rpartition(":")
    if colon and port.isdigit() and not location.bucket.endswith("]"):
        return f"{location.scheme}://{host}", int(port)  # as pyarrow's HadoopFileSystem.from_uri splits it
    return f"{location.scheme}://{location.bucket}", 0


def prepare_hdfs_environment(environ=None) -> list[str]:
    """Make this process ready for libhdfs where it can; what it still lacks (names for a message).

    ``ARROW_LIBHDFS_DIR`` defaults to ``HADOOP_HOME/lib/native`` when that holds ``libhdfs.so``; when
    ``CLASSPATH`` lacks Hadoop's jars and a ``hadoop`` command is found (``HADOOP_HOME/bin/hadoop``,
    else on ``PATH``), ``hadoop classpath --glob`` is run once and its output set as ``CLASSPATH``
    (the JVM libhdfs starts reads it), as pyarrow's documentation advises."""
    env = os.environ if environ is None else environ
    missing = []
    hadoop_home = env.get("HADOOP_HOME", "")
    native = os.path.join(hadoop_home, "lib", "native") if hadoop_home else ""
    if not env.get("ARROW_LIBHDFS_DIR") and native and os.path.exists(os.path.join(native, "libhdfs.so")):
        env["ARROW_LIBHDFS_DIR"] = native
    libdirs = [env.get("ARROW_LIBHDFS_DIR", ""), native]
    if not any(d and os.path.exists(os.path.join(d, "libhdfs.so")) for d in libdirs):
        missing.append("libhdfs.so (set ARROW_LIBHDFS_DIR, or HADOOP_HOME with lib/native/libhdfs.so)")
    if not env.get("JAVA_HOME") and shutil.which("java", path=env.get("PATH")) is None:
        missing.append("a JVM (JAVA_HOME)")
    if not _has_hadoop_jars(env.get("CLASSPATH", "")):
        command = _hadoop_command(env)
        classpath = _hadoop_classpath(command, env) if command else None
        if classpath:
            current = env.get("CLASSPATH", "")
            env["CLASSPATH"] = f"{current}{os.pathsep}{classpath}" if current else classpath
        elif command:
            missing.append(
                f"Hadoop's jars on CLASSPATH ({command} classpath --glob failed; "
                "export CLASSPATH=$(hadoop classpath --glob))"
            )
        else:
            missing.append(
                "Hadoop's jars on CLASSPATH (no hadoop command in HADOOP_HOME/bin or on PATH; "
                "export CLASSPATH=$(hadoop classpath --glob))"
            )
    return missing


def _has_hadoop_jars(classpath: str) -> bool:
    return "hadoop" in classpath.lower()


def _hadoop_command(env) -> str | None:
    """The ``hadoop`` command: ``HADOOP_HOME/bin/hadoop``, else the one on ``PATH``; None without one."""
    if env.get("HADOOP_HOME"):
        candidate = os.path.join(env["HADOOP_HOME"], "bin", "hadoop")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("hadoop", path=env.get("PATH"))


def _hadoop_classpath(command: str, env) -> str | None:
    """``hadoop classpath --glob``'s output (None when it fails, times out or prints no Hadoop jar)."""
    try:
        result = subprocess.run(
            [command, "classpath", "--glob"],
            capture_output=True,
            text=True,
            timeout=HADOOP_CLASSPATH_TIMEOUT_S,
            env=dict(env),
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    classpath = lines[-1] if lines else ""  # the last line: a wrapper may print notices first
    return classpath if result.returncode == 0 and _has_hadoop_jars(classpath) else None


def explain(location: Location, settings: StoreSettings, exc: BaseException, doing: str) -> StorageError:
    """A :class:`StorageError` for ``exc`` (raised while ``doing`` something with ``location``) that
    names the path, the store and the setting to change, without a credential."""
    text = str(exc)
    lowered = text.lower()
    setting = ""
    if location.store == "s3":
        options = s3_options(settings, location.bucket)
        endpoint = f"{options.scheme or 'https'}://{options.endpoint}" if options.endpoint else "AWS's own endpoint"
        where = f"endpoint {endpoint}" + (f" (from {options.source})" if options.source else "")
        creds = options.credentials_source or "the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, a role)"
        squeezed = lowered.replace(" ", "").replace("_", "")
        if "nosuchbucket" in squeezed or "does not exist" in lowered:
            setting = f"bucket {location.bucket!r} does not exist at {where}: create it, or fix the path"
        elif any(w in squeezed for w in ("accessdenied", "forbidden", "invalidaccesskeyid", "signature")):
            setting = f"the store at {where} refused the credentials from {creds}: check them"
        elif any(w in lowered for w in ("curl", "connect", "timed out", "timeout", "resolve", "unreachable")):
            setting = f"cannot reach {where}: check it (fs.s3a.endpoint, AWS_ENDPOINT_URL) and the network"
        else:
            setting = f"at {where}, credentials from {creds}"
    elif location.store == "azure":
        options = azure_options(settings, location.account)
        creds = options.source or "the Azure default credential chain (managed identity, AZURE_CLIENT_ID...)"
        if "does not exist" in lowered or "containernotfound" in lowered.replace(" ", ""):
            setting = (
                f"container {location.bucket!r} does not exist in account {options.account!r} (credentials from "
                f"{creds}): create it, or fix the path"
            )
        elif any(w in lowered for w in ("403", "authorization", "authentication", "forbidden", "signature")):
            setting = f"account {options.account!r} refused the credentials from {creds}: check them"
        elif any(w in lowered for w in ("connect", "timed out", "timeout", "resolve", "unreachable")):
            setting = f"cannot reach account {options.account!r}: check its endpoint and the network"
        else:
            setting = f"account {options.account!r}, credentials from {creds}"
    elif location.store == "gcs":
        options = gcs_options()
        setting = (
            f"endpoint {options.endpoint} (STORAGE_EMULATOR_HOST)"
            if options.endpoint
            else ("Google's default credentials (GOOGLE_APPLICATION_CREDENTIALS)")
        )
    message = f"cannot {doing} {location.describe()}: {_without_secrets(text, settings)}"
    if setting:
        message += f" [{setting}]"
    return StorageError(message)


def _without_secrets(text: str, settings: StoreSettings) -> str:
    """``text`` with any secret sparkdl knows of replaced (store messages may echo request parts)."""
    secrets = [value for name, value in settings.hadoop if value and len(value) >= 6 and _secret_name(name)]
    for name in (
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AZURE_STORAGE_KEY",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_CLIENT_SECRET",
    ):
        if len(os.environ.get(name, "")) >= 6:
            secrets.append(os.environ[name])
    for part in os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "").split(";"):  # its key or signature
        name, _, value = part.partition("=")
        if name.strip().lower() in ("accountkey", "sharedaccesssignature") and len(value.strip()) >= 6:
            secrets.append(value.strip())
    for secret in secrets:
        text = text.replace(secret, "***")
    return text.strip().splitlines()[0] if text.strip() else type(text).__name__


def _secret_name(name: str) -> bool:
    from .settings import is_secret

    return is_secret(name)
