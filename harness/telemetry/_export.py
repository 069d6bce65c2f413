"""Where spans go: which OTLP backend, from the standard ``OTEL_*`` environment variables over the config.

:func:`resolve_otlp` gives the :class:`OtlpSettings` (endpoint, protocol, headers, timeout) or None when no
backend is configured; :func:`parse_headers` reads the ``k=v,k2=v2`` header syntax. The file store and the
export thread live in :mod:`harness.telemetry._writer` and :mod:`harness.telemetry._sender`; which spans
exist is decided in :mod:`harness.telemetry._run`. This module sends nothing.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.cfg.telemetry import TelemetrySection

__all__ = ["OtlpSettings", "resolve_otlp", "parse_headers"]


@dataclass(frozen=True)
class OtlpSettings:
    """A resolved OTLP destination.

    Attributes:
        endpoint: the full traces URL for http/protobuf (``.../v1/traces``), ``host:port`` URL for grpc.
        protocol: ``http/protobuf`` or ``grpc``.
        headers: request headers (grpc metadata keys are lower-cased).
        timeout_s: per request.
    """

    endpoint: str
    protocol: str = "http/protobuf"
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 5.0


def parse_headers(text: str) -> dict[str, str]:
    """``k1=v1,k2=v2`` (URL-encoded values, as in ``OTEL_EXPORTER_OTLP_HEADERS``) to a dict.

    Raises:
        ValueError: for an entry without ``=``, naming it.
    """
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise ValueError(f"OTLP header {part.strip()!r} is not key=value")
        k, v = part.split("=", 1)
        out[urllib.parse.unquote(k.strip())] = urllib.parse.unquote(v.strip())
    return out


def _traces_url(base: str) -> str:
    return base.rstrip("/") + "/v1/traces"


def resolve_otlp(section: TelemetrySection, environ: Mapping[str, str] | None = None) -> OtlpSettings | None:
    """The OTLP destination from ``OTEL_*`` variables over ``section``; None when there is none.

    Follows the OpenTelemetry specification: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as is,
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is a base URL to which http/protobuf appends ``/v1/traces``;
    ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_SDK_DISABLED=true`` turn export off. The config's ``otlp_endpoint``
    is a full traces URL for http/protobuf.

    Raises:
        ValueError: for an unknown protocol or a malformed header variable, naming the variable.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or section.otlp_protocol
    ).strip()
    if protocol not in ("http/protobuf", "grpc"):
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or grpc, got {protocol!r}")
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        base = env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip()
        endpoint = _traces_url(base) if protocol == "http/protobuf" else base
    elif section.otlp_endpoint:
        endpoint = section.otlp_endpoint
    else:
        return None
    headers = dict(section.otlp_headers)
    for var in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        if env.get(var):
            try:
                headers.update(parse_headers(env[var]))
            except ValueError as e:
                raise ValueError(f"{var}: {e}") from None
    if protocol == "grpc":
        headers = {k.lower(): v for k, v in headers.items()}
    return OtlpSettings(endpoint=endpoint, protocol=protocol, headers=headers, timeout_s=section.export_timeout_s)
