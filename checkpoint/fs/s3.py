"""``s3://`` and ``s3a://`` (Hadoop's name for the same store, read as ``s3://``) through ``pyarrow.fs.S3FileSystem``."""
from __future__ import annotations

from typing import Mapping

from ..errors import CheckpointError, arg
from .arrow import ArrowFileSystem, bounded, bucket_store, one_line
from .options import Option, store_options
from .uri import bucket_location

SCHEMES = ("s3", "s3a")
OPTIONS = (
    Option("access_key", "str", "access key id (default: AWS_ACCESS_KEY_ID, ~/.aws, the instance's role)", "AKIAIOSFODNN7EXAMPLE"),
    Option("secret_key", "str", "secret access key (default: AWS_SECRET_ACCESS_KEY)", "wJalrXUtnFEMI"),
    Option("session_token", "str", "session token of temporary credentials", "FwoGZXIvYXdzE"),
    Option("anonymous", "bool", "connect without credentials (public buckets)", "true"),
    Option("role_arn", "str", "assume this IAM role", "arn:aws:iam::123456789012:role/reader"),
    Option("session_name", "str", "session name of the assumed role", "wmcheck"),
    Option("external_id", "str", "external id the role requires", "ext-1"),
    Option("load_frequency", "int", "seconds between refreshes of the assumed role's credentials", "900"),
    Option("region", "str", "the bucket's region (default: asked of S3)", "eu-west-1"),
    Option("endpoint_override", "str", "another endpoint, e.g. localhost:9000 or http://localhost:9000 (MinIO)", "localhost:9000"),
    Option("scheme", "str", "http or https to the endpoint (default https)", "http"),
    Option("connect_timeout", "seconds", "seconds to connect (default: timeout)", "10"),
    Option("request_timeout", "seconds", "seconds for one request (default: timeout)", "60"),
    Option("force_virtual_addressing", "bool", "address buckets as host names (bucket.endpoint)", "true"),
    Option("tls_ca_file_path", "str", "CA certificates to trust (a PEM file)", "/etc/ssl/certs/ca-certificates.crt"),
    Option("proxy_options", "str", "a proxy, e.g. http://proxy:8080", "http://proxy:8080"),
)
HINT = (f"check the network, the bucket, the credentials (AWS_* environment variables) and "
        f"{arg('fs_options', 'endpoint_override=HOST:PORT')} for an S3-compatible store")


def open_store(location: str, given: Mapping[str, str]) -> ArrowFileSystem:
    """The bucket and path of ``location``."""
    from pyarrow import fs as pafs

    loc = bucket_location(location)
    kwargs, timeout = store_options(given, OPTIONS, "S3")
    kwargs.setdefault("connect_timeout", timeout)
    kwargs.setdefault("request_timeout", timeout)
    if "region" not in kwargs and "endpoint_override" not in kwargs:  # as pyarrow's from_uri: ask S3
        try:
            kwargs["region"] = bounded(lambda: pafs.resolve_s3_region(loc.authority), timeout, f"S3 (the region of bucket {loc.authority})")
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot find the region of bucket {loc.authority}: {one_line(exc)}",
                                  hint=f"pass {arg('fs_options', 'region=REGION')}, or " + HINT) from None
    fs = bounded(lambda: pafs.S3FileSystem(**kwargs), timeout, "S3")
    return bucket_store(fs, loc, timeout, HINT)
