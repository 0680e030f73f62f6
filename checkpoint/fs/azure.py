"""``abfs://`` and ``abfss://`` (``container@account.dfs.core.windows.net``) through ``pyarrow.fs.AzureFileSystem``."""
from __future__ import annotations

import os
import shutil
from typing import Mapping

from ..errors import CheckpointError, UnsupportedError, arg
from .arrow import ArrowFileSystem, StoreUri, bounded
from .options import Option, store_options
from .uri import split_uri

SCHEMES = ("abfs", "abfss")
OPTIONS = (
    Option("account_name", "str", "the storage account (default: from the URI's host)", "myaccount"),
    Option("account_key", "str", "the account's access key", "a2V5"),
    Option("sas_token", "str", "a shared access signature", "sv=2022-11-02&sig=abc"),
    Option("client_id", "str", "a service principal's or managed identity's client id", "00000000-0000-0000-0000-000000000001"),
    Option("client_secret", "str", "the service principal's secret (with client_id and tenant_id)", "secret"),
    Option("tenant_id", "str", "the service principal's tenant", "00000000-0000-0000-0000-000000000002"),
    Option("blob_storage_authority", "str", "another blob endpoint, e.g. 127.0.0.1:10000 (Azurite)", "127.0.0.1:10000"),
    Option("blob_storage_scheme", "str", "http or https to the blob endpoint", "http"),
    Option("dfs_storage_authority", "str", "another DFS endpoint", "127.0.0.1:10000"),
    Option("dfs_storage_scheme", "str", "http or https to the DFS endpoint", "http"),
)
CREDENTIALS = (f"pass {arg('fs_options', 'account_key=KEY')} (or sas_token=..., or client_id, client_secret and "
               "tenant_id), set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET, or install the Azure CLI "
               "(az) and run az login; with a managed identity pass its client_id")
HINT = "check the network, the container, the account and the credentials: " + CREDENTIALS
_ENVIRONMENT = (("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET"),
                ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE"), ("IDENTITY_ENDPOINT",), ("MSI_ENDPOINT",))


def has_credentials(kwargs: Mapping[str, object]) -> bool:
    """Whether pyarrow will find credentials without running the Azure CLI when it is not installed (the
    default chain then prints ``/bin/sh: az: not found`` and fails over several lines)."""
    if any(kwargs.get(k) for k in ("account_key", "sas_token", "client_id")):
        return True
    return any(all(os.environ.get(v) for v in names) for names in _ENVIRONMENT) or shutil.which("az") is not None


def open_store(location: str, given: Mapping[str, str]) -> ArrowFileSystem:
    """``abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH`` (or ``abfss://CONTAINER/PATH`` with account_name)."""
    from pyarrow import fs as pafs

    loc = split_uri(location)
    kwargs, timeout = store_options(given, OPTIONS, "Azure")
    container, at, host = loc.authority.partition("@")
    if not at:
        host = ""
    kwargs.setdefault("account_name", host.split(".")[0])
    if not container or not kwargs["account_name"]:
        raise CheckpointError(f"no container or account in {location}",
                              hint="write abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH")
    if not has_credentials(kwargs):
        raise CheckpointError(f"no Azure credentials for {location}", hint=CREDENTIALS, param="fs_options")
    if not hasattr(pafs, "AzureFileSystem"):
        raise UnsupportedError("this pyarrow has no Azure file system", hint="pip install 'pyarrow>=16'")
    fs = bounded(lambda: pafs.AzureFileSystem(**kwargs), timeout, "Azure")
    prefix = f"{loc.scheme}://{container}@{host}" if host else f"{loc.scheme}://{container}"
    return ArrowFileSystem(fs, f"{container}/{loc.path}", StoreUri(prefix + "/", drop_first=True), timeout, HINT)
