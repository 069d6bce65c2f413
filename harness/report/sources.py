"""Read a run's spans back: from the OTLP-JSON file store, from Phoenix's REST API or from MLflow's REST API.

Every reader returns the flat span dicts of :func:`harness.telemetry.iter_spans`, each made by the file store's
``flat_span`` (MLflow's spans, OTLP in protobuf's JSON form, go through its decoder too), so the report does not
care where spans came from. Only the standard library's HTTP client is used. Phoenix stores no span links
(``links == []``); the report joins by the ``harness.run.id`` / ``harness.train.step`` / ``harness.reward.name``
attributes instead.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext

from harness.errors import HarnessError
from harness.telemetry import flat_span, hex_span_ids, iter_spans, span_from_json, store_path

__all__ = ["SourceError", "load_file_store", "load_phoenix", "load_mlflow"]


class SourceError(HarnessError):
    """Spans cannot be read from where they were asked for (missing file, backend not answering)."""


def load_file_store(path: str | Path) -> list[dict[str, Any]]:
    """Spans of a run directory (its ``traces.jsonl``) or of an OTLP-JSON file (every run's: the report picks).

    Raises:
        SourceError: when the file does not exist.
    """
    p = store_path(path)
    if not p.is_file():
        raise SourceError(f"{p}: no trace file store (expected OTLP JSON lines written by harness.telemetry)")
    return list(iter_spans(p))


def _get_json(url: str, data: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(url, body, {"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        raise SourceError(f"{url}: HTTP {e.code}: {e.read()[:300].decode(errors='replace')}") from None
    except (urllib.error.URLError, OSError, json.JSONDecodeError) as e:
        raise SourceError(f"{url}: {e}") from None


def _iso_ns(s: str | None) -> int:
    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1e9) if s else 0


def _phoenix_span(sp: dict[str, Any]) -> dict[str, Any]:
    """A span of Phoenix's REST API (hex ids, ISO times, flat attributes, no links) as the SDK's span, flattened."""
    attrs, ctx = dict(sp.get("attributes") or {}), sp.get("context") or {}
    if sp.get("span_kind"):
        attrs.setdefault("openinference.span.kind", sp["span_kind"])
    trace_id = int(ctx["trace_id"], 16)
    return flat_span(
        ReadableSpan(
            sp.get("name", ""),
            SpanContext(trace_id, int(ctx["span_id"], 16), False),
            SpanContext(trace_id, int(sp["parent_id"], 16), False) if sp.get("parent_id") else None,
            Resource({}),
            attrs,
            [Event(e.get("name", ""), e.get("attributes") or {}) for e in sp.get("events") or ()],
            start_time=_iso_ns(sp.get("start_time")),
            end_time=_iso_ns(sp.get("end_time")),
        )
    )


def load_phoenix(
    url: str, *, project: str = "grpo-harness", timeout: float = 30.0, page_size: int = 1000
) -> list[dict[str, Any]]:
    """All spans of a Phoenix project (``GET /v1/projects/{project}/spans``, followed page by page).

    Raises:
        SourceError: when Phoenix does not answer, has no such project or sends a span without hex ids.
    """
    base = url.rstrip("/") + f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    spans: list[dict[str, Any]] = []
    cursor = None
    while True:
        q = {"limit": page_size, **({"cursor": cursor} if cursor else {})}
        page = _get_json(f"{base}?{urllib.parse.urlencode(q)}", timeout=timeout)
        try:
            spans += map(_phoenix_span, page.get("data") or ())
        except (KeyError, TypeError, ValueError) as e:
            raise SourceError(f"{base}: a span without hex trace and span ids ({type(e).__name__}: {e})") from None
        if not (cursor := page.get("next_cursor")):
            return spans


def _otlp_json(sp: dict[str, Any]) -> dict[str, Any]:
    """An MLflow span (protobuf's JSON form with proto field names and base64 ids) as OTLP/JSON (hex ids)."""
    msg = json_format.ParseDict(sp, Span(), ignore_unknown_fields=True)  # MLflow may add fields of its own
    return hex_span_ids(json_format.MessageToDict(msg, use_integers_for_enums=True))


def load_mlflow(
    url: str, *, experiment_id: str = "0", run_id: str | None = None, timeout: float = 30.0, batch: int = 50
) -> list[dict[str, Any]]:
    """All spans of the traces of an MLflow experiment (``traces/search`` then ``traces/batchGet``).

    ``run_id`` only skips fetching traces tagged with another run; the report picks the run's spans.

    Raises:
        SourceError: when MLflow does not answer, the experiment does not exist or a span is not OTLP.
    """
    base = url.rstrip("/") + "/api/3.0/mlflow/traces"
    location = {"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": str(experiment_id)}}
    ids: list[str] = []
    token = None
    while True:
        body = {"locations": [location], "max_results": 500, **({"page_token": token} if token else {})}
        page = _get_json(base + "/search", body, timeout)
        ids += [
            t["trace_id"]
            for t in page.get("traces") or ()
            if run_id is None or (t.get("tags") or {}).get("harness.run.id") in (None, run_id)
        ]
        if not (token := page.get("next_page_token")):
            break
    spans: list[dict[str, Any]] = []
    for i in range(0, len(ids), batch):
        got = _get_json(
            f"{base}/batchGet?{urllib.parse.urlencode([('trace_ids', t) for t in ids[i : i + batch]])}", timeout=timeout
        )
        for tr in got.get("traces") or ():
            tags = (tr.get("trace_info") or {}).get("tags") or {}
            resource = Resource({k: v for k, v in tags.items() if k in ("harness.run.id", "service.name")})
            scope = InstrumentationScope("mlflow")
            try:
                spans += [flat_span(span_from_json(_otlp_json(sp), resource, scope)) for sp in tr.get("spans") or ()]
            except (json_format.ParseError, KeyError, TypeError, ValueError) as e:
                trace_id = (tr.get("trace_info") or {}).get("trace_id")
                raise SourceError(f"{base}/batchGet: trace {trace_id}: a span that is not OTLP: {e}") from None
    return spans
