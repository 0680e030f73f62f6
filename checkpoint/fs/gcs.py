"""``gs://`` (``gcs://``) through ``pyarrow.fs.GcsFileSystem``."""
from __future__ import annotations

from datetime import timedelta
from typing import Mapping

from ..errors import arg
from .arrow import ArrowFileSystem, bounded, bucket_store
from .options import Option, store_options
from .uri import bucket_location

SCHEMES = ("gs", "gcs")
OPTIONS = (
    Option("anonymous", "bool", "connect without credentials (public buckets)", "true"),
    Option("access_token", "str", "an OAuth2 access token (with credential_token_expiration)", "ya29.token"),
    Option("credential_token_expiration", "instant", "when access_token expires (ISO date-time)", "2030-01-01T00:00:00+00:00"),
    Option("target_service_account", "str", "impersonate this service account", "reader@project.iam.gserviceaccount.com"),
    Option("project_id", "str", "the project of the bucket", "my-project"),
    Option("endpoint_override", "str", "another endpoint, e.g. localhost:4443 (fake-gcs-server)", "localhost:4443"),
    Option("scheme", "str", "http or https to the endpoint (default https)", "http"),
    Option("retry_time_limit", "duration", "seconds to retry a failing call (default: half the timeout)", "60"),
)
HINT = (f"check the network, the bucket and the credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth "
        f"application-default login, or {arg('fs_options', 'anonymous=true')} for a public bucket)")


def open_store(location: str, given: Mapping[str, str]) -> ArrowFileSystem:
    """The bucket and path of ``location``."""
    from pyarrow import fs as pafs

    loc = bucket_location(location)
    kwargs, timeout = store_options(given, OPTIONS, "GCS")
    kwargs.setdefault("retry_time_limit", timedelta(seconds=timeout / 2))  # its own error, before the deadline
    fs = bounded(lambda: pafs.GcsFileSystem(**kwargs), timeout, "GCS")
    return bucket_store(fs, loc, timeout, HINT)
