"""How sparkdl reaches each store: the user's Spark settings, carried as they are, plus each
cloud SDK's own environment and credential chain.

Two sources, in this order, per setting:

1. **Spark's Hadoop configuration** (``spark.hadoop.fs.s3a.endpoint``, ``fs.s3a.access.key``,
   ``fs.s3a.path.style.access``, ``fs.azure.account.key.<account>...``, per-bucket
   ``fs.s3a.bucket.<bucket>.<setting>``; also ``core-site.xml``): the driver reads the ``fs.s3a.``,
   ``fs.azure.`` and ``fs.gs.`` entries once (:func:`hadoop_settings`) and every node, and every
   executor that loads a model, gets the same ones inside :class:`StoreSettings`. So a cluster
   set up for Spark's own S3A reads is set up for sparkdl.
2. **The environment and each SDK's credential chain**, where the process runs: AWS's
   (``AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``..., ``AWS_PROFILE``,
   ``~/.aws``, instance and container roles), Google's (``GOOGLE_APPLICATION_CREDENTIALS``, the
   metadata server; ``STORAGE_EMULATOR_HOST``) and Azure's (``AZURE_STORAGE_CONNECTION_STRING``,
   ``AZURE_STORAGE_KEY``/``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, else the
   default chain: environment service principal, workload or managed identity, Azure CLI).

Secrets (keys, tokens, connection strings) stay inside :class:`StoreSettings`, whose ``repr`` shows
setting names only; no message of this package holds one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping

#: The Hadoop configuration prefixes sparkdl carries to the nodes.
HADOOP_PREFIXES = ("fs.s3a.", "fs.azure.", "fs.gs.")
#: Setting names whose values are secrets (matched as substrings of the lower-cased name).
SECRET_WORDS = ("secret", "key", "token", "password", "credential", "sas", "connection")


@dataclass(frozen=True)
class StoreSettings:
    """The Hadoop store settings of the user's Spark (``fs.s3a.*``, ``fs.azure.*``, ``fs.gs.*``),
    as read on the driver. Picklable; its ``repr`` lists names, never values."""

    hadoop: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    #: Where a setting came from, when not from the user's own configuration (names only, no values):
    #: e.g. ``fs.s3a.endpoint`` -> "fs.s3a.endpoint, set by Spark from AWS_ENDPOINT_URL".
    origins: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_mapping(cls, values: Mapping[str, str], origins: Mapping[str, str] | None = None) -> "StoreSettings":
        """The settings among ``values`` (Hadoop names, or ``spark.hadoop.``-prefixed Spark names)."""
        found = {}
        for name, value in values.items():
            bare = name[len("spark.hadoop.") :] if name.startswith("spark.hadoop.") else name
            if bare.startswith(HADOOP_PREFIXES) and value is not None:
                found[bare] = str(value)
        named = {name: text for name, text in (origins or {}).items() if name in found}
        return cls(tuple(sorted(found.items())), tuple(sorted(named.items())))

    def origin(self, name: str) -> str:
        """How to name the setting ``name`` in a message: itself, and where Spark took it from."""
        return dict(self.origins).get(name, name)

    def get(self, name: str) -> str | None:
        """The Hadoop setting ``name``, None when unset."""
        for key, value in self.hadoop:
            if key == name:
                return value
        return None

    def __repr__(self) -> str:
        return f"StoreSettings({[name for name, _ in self.hadoop]})"


def is_secret(name: str) -> bool:
    """Whether the setting ``name`` holds a secret (never printed)."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS) and not lowered.endswith((".provider", ".type"))


# -- S3 --


@dataclass(frozen=True)
class S3Options:
    """What the S3 client of one bucket is made with; ``source`` names where the endpoint came from."""

    endpoint: str | None = None  # host[:port], without a scheme
    scheme: str | None = None  # "http" or "https" (None: the client's default, https)
    region: str | None = None  # None: look the bucket's region up (AWS itself, no region configured)
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    anonymous: bool = False
    virtual_addressing: bool = False
    source: str = ""  # e.g. "fs.s3a.endpoint" or "AWS_ENDPOINT_URL"
    credentials_source: str = ""  # e.g. "fs.s3a.access.key", or "" for the AWS SDK's chain


def s3_options(settings: StoreSettings, bucket: str, environ: Mapping[str, str] | None = None) -> S3Options:
    """The S3 client options for ``bucket``: Hadoop's ``fs.s3a.bucket.<bucket>.X`` over ``fs.s3a.X``,
    then the AWS environment (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    ``AWS_DEFAULT_REGION``, ``AWS_S3_ADDRESSING_STYLE``); credentials not given in Hadoop's settings
    come from the AWS SDK's own chain (environment, profile, instance or container role)."""
    env = os.environ if environ is None else environ

    def hadoop(name: str) -> tuple[str | None, str]:
        for key in (f"fs.s3a.bucket.{bucket}.{name}", f"fs.s3a.{name}"):
            value = settings.get(key)
            if value not in (None, ""):
                return value, key
        return None, ""

    endpoint, source = hadoop("endpoint")
    source = settings.origin(source) if source else source
    if endpoint is None:
        for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
            if env.get(name):
                endpoint, source = env[name], name
                break
    scheme = None
    if endpoint is not None:
        if "://" in endpoint:
            scheme, _, endpoint = endpoint.partition("://")
        else:
            ssl, _ = hadoop("connection.ssl.enabled")
            scheme = "http" if (ssl or "true").lower() == "false" else "https"
        endpoint = endpoint.rstrip("/")
    region = (
        hadoop("endpoint.region")[0]
        or hadoop("region")[0]
        or endpoint_region(endpoint)
        or env.get("AWS_REGION")
        or env.get("AWS_DEFAULT_REGION")
    )
    if region is None and endpoint is not None and not is_aws_endpoint(endpoint):
        region = "us-east-1"  # an S3-protocol server of one's own: any region will do
    path_style, _ = hadoop("path.style.access")
    style = env.get("AWS_S3_ADDRESSING_STYLE", "").lower()
    virtual = (path_style or "").lower() == "false" or (path_style is None and style == "virtual")
    access_key, credentials_source = hadoop("access.key")
    credentials_source = settings.origin(credentials_source) if credentials_source else ""
    secret_key, _ = hadoop("secret.key")
    token, _ = hadoop("session.token")
    providers = [name.strip() for name in (hadoop("aws.credentials.provider")[0] or "").split(",") if name.strip()]
    return S3Options(
        endpoint=endpoint,
        scheme=scheme,
        region=region,
        access_key=access_key,
        secret_key=secret_key,
        session_token=token,
        # anonymous only when it is the one provider: as one fallback among several, the others come first
        anonymous=len(providers) == 1 and "anonymous" in providers[0].lower(),
        virtual_addressing=virtual,
        source=source,
        credentials_source=credentials_source,
    )


#: An AWS S3 endpoint host that names its region: s3.<region>.amazonaws.com, s3-<region>.amazonaws.com,
#: s3.dualstack.<region>..., s3-fips.<region>..., <bucket>.s3.<region>... (and .amazonaws.com.cn).
_AWS_S3_HOST = re.compile(
    r"(?:^|\.)s3(?:-fips)?(?:[.-]dualstack)?[.-](?P<region>[a-z]{2,4}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$"
)


def _host(endpoint: str) -> str:
    """The host of an endpoint (``[scheme://]host[:port][/path]``), lower-cased."""
    rest = endpoint.partition("://")[2] if "://" in endpoint else endpoint
    host = rest.split("/", 1)[0]
    if not host.endswith("]"):
        host = host.rsplit(":", 1)[0] if ":" in host else host
    return host.lower()


def is_aws_endpoint(endpoint: str) -> bool:
    """Whether ``endpoint`` is one of AWS's own S3 endpoints (``*.amazonaws.com[.cn]``)."""
    return _host(endpoint).endswith((".amazonaws.com", ".amazonaws.com.cn"))


def endpoint_region(endpoint: str | None) -> str | None:
    """The AWS region an S3 endpoint names (``s3.eu-west-1.amazonaws.com``: eu-west-1); None for AWS's
    global endpoint (``s3.amazonaws.com``), no endpoint, or another server's."""
    if not endpoint:
        return None
    match = _AWS_S3_HOST.search(_host(endpoint))
    return match.group("region") if match else None


# -- Azure --


@dataclass(frozen=True)
class AzureOptions:
    """What the Azure client of one storage account is made with (a service principal's ``client_id``,
    ``client_secret`` and ``tenant_id``; or a managed identity's ``client_id`` alone)."""

    account: str
    account_key: str | None = field(default=None, repr=False)
    sas_token: str | None = field(default=None, repr=False)
    blob_authority: str | None = None  # host[:port] of the Blob endpoint (Azurite, sovereign clouds)
    dfs_authority: str | None = None
    scheme: str | None = None
    source: str = ""
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    tenant_id: str | None = None


#: Azure's public cloud: a host under it needs no endpoint of its own.
_PUBLIC_AZURE = ".core.windows.net"


def azure_options(settings: StoreSettings, host: str, environ: Mapping[str, str] | None = None) -> AzureOptions:
    """The Azure client options for the account of ``host`` (``<account>.dfs.core.windows.net``), as
    Hadoop's ABFS reads them (each ``fs.azure.X.<host>`` over ``fs.azure.X``):

    - ``fs.azure.account.auth.type=OAuth`` with ``fs.azure.account.oauth2.client.id``,
      ``.client.secret`` and ``.client.endpoint`` (``https://login.microsoftonline.com/<tenant>/...``):
      that service principal (a client id alone: that managed identity);
    - else ``fs.azure.account.key.<host>``, then ``AZURE_STORAGE_CONNECTION_STRING`` (its
      ``AccountKey``, ``SharedAccessSignature``, ``BlobEndpoint``), ``AZURE_STORAGE_KEY`` /
      ``AZURE_STORAGE_ACCOUNT_KEY``; a SAS from ``fs.azure.sas.fixed.token.<host>`` or
      ``AZURE_STORAGE_SAS_TOKEN``;
    - with none of them the Azure SDK's default chain (service principal environment, workload or
      managed identity, Azure CLI).

    A host outside Azure's public cloud (``<account>.dfs.core.usgovcloudapi.net``) is the account's
    endpoint (its Blob one: ``.dfs.`` as ``.blob.``), unless a connection string names endpoints."""
    env = os.environ if environ is None else environ
    account = host.split(".", 1)[0]

    def hadoop(name: str) -> tuple[str | None, str]:
        for key in (f"{name}.{host}", f"{name}.{account}.dfs.core.windows.net", name):
            value = settings.get(key)
            if value not in (None, ""):
                return value, key
        return None, ""

    key, source = None, ""
    client_id = client_secret = tenant_id = None
    auth_type = (hadoop("fs.azure.account.auth.type")[0] or "").strip().lower()
    if auth_type == "oauth":
        client_id, _ = hadoop("fs.azure.account.oauth2.client.id")
        secret, secret_name = hadoop("fs.azure.account.oauth2.client.secret")
        tenant_id = _tenant(hadoop("fs.azure.account.oauth2.client.endpoint")[0])
        if client_id and secret and tenant_id:
            client_secret, source = secret, secret_name
        else:  # not a whole service principal: a managed identity's (MsiTokenProvider) client id, if any
            provider = (hadoop("fs.azure.account.oauth.provider.type")[0] or "").lower()
            client_id = client_id if "msi" in provider else None
            tenant_id = None
            source = "fs.azure.account.oauth2.client.id (a managed identity)" if client_id else ""
    for name in (f"fs.azure.account.key.{host}", f"fs.azure.account.key.{account}.dfs.core.windows.net"):
        if auth_type != "oauth" and settings.get(name):
            key, source = settings.get(name), name
            break
    parts = _connection_string(env.get("AZURE_STORAGE_CONNECTION_STRING", ""))
    sas = None
    blob_authority = dfs_authority = scheme = None
    if parts and parts.get("accountname", account) == account:
        if key is None and auth_type != "oauth" and parts.get("accountkey"):
            key, source = parts["accountkey"], "AZURE_STORAGE_CONNECTION_STRING"
        if auth_type != "oauth":
            sas = parts.get("sharedaccesssignature")
        endpoint = parts.get("blobendpoint")
        if endpoint:
            scheme, _, rest = endpoint.partition("://")
            blob_authority = rest.split("/", 1)[0]
            dfs_authority = blob_authority
        elif parts.get("defaultendpointsprotocol"):
            scheme = parts["defaultendpointsprotocol"]
    if auth_type != "oauth":
        for name in ("AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY"):
            if key is None and env.get(name):
                key, source = env[name], name
        fixed, fixed_name = hadoop("fs.azure.sas.fixed.token")
        if key is None and sas is None and fixed:
            sas, source = fixed, fixed_name
        if sas is None and env.get("AZURE_STORAGE_SAS_TOKEN"):
            sas = env["AZURE_STORAGE_SAS_TOKEN"]
    if blob_authority is None and "." in host and not host.lower().endswith(_PUBLIC_AZURE):
        dfs_authority = host.replace(".blob.", ".dfs.", 1)
        blob_authority = dfs_authority.replace(".dfs.", ".blob.", 1)
    return AzureOptions(
        account, key, sas, blob_authority, dfs_authority, scheme, source, client_id, client_secret, tenant_id
    )


def _tenant(endpoint: str | None) -> str | None:
    """The tenant of an OAuth token endpoint (``https://login.microsoftonline.com/<tenant>/oauth2/token``)."""
    if not endpoint:
        return None
    path = endpoint.partition("://")[2].partition("/")[2] if "://" in endpoint else endpoint.partition("/")[2]
    tenant = path.split("/", 1)[0]
    return tenant or None


def _connection_string(text: str) -> dict[str, str]:
    """An Azure connection string's ``Name=value`` parts, names lower-cased."""
    parts = {}
    for item in text.split(";"):
        name, sep, value = item.partition("=")
        if sep:
            parts[name.strip().lower()] = value.strip()
    return parts


# -- GCS --


@dataclass(frozen=True)
class GcsOptions:
    """What the GCS client is made with (credentials: Google's default chain)."""

    endpoint: str | None = None
    scheme: str | None = None
    anonymous: bool = False
    source: str = ""


def gcs_options(environ: Mapping[str, str] | None = None) -> GcsOptions:
    """GCS client options: ``STORAGE_EMULATOR_HOST`` (Google's own name for an emulator's address)
    or Google's default credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud, the metadata server)."""
    env = os.environ if environ is None else environ
    emulator = env.get("STORAGE_EMULATOR_HOST")
    if not emulator:
        return GcsOptions()
    scheme, sep, rest = emulator.partition("://")
    if not sep:
        scheme, rest = "http", emulator
    return GcsOptions(rest.rstrip("/"), scheme, True, "STORAGE_EMULATOR_HOST")
