"""Read a run's spans back: from the OTLP-JSON file store, from Phoenix's REST API or from MLflow's REST API.

Every reader returns the flat span dicts of :func:`harness.telemetry.iter_spans`, so the report does not care
where spans came from; MLflow's spans (OTLP in protobuf's JSON form) go through the file store's own decoder.
Only the standard library's HTTP client is used. Phoenix stores no span links (``links == []``); the report joins
by the ``harness.run.id`` / ``harness.train.step`` / ``harness.reward.name`` attributes instead.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from harness.errors import HarnessError
from harness.telemetry._store import flat_span, iter_spans, span_from_json, store_path

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


def load_phoenix(
    url: str, *, project: str = "grpo-harness", timeout: float = 30.0, page_size: int = 1000
) -> list[dict[str, Any]]:
    """All spans of a Phoenix project (``GET /v1/projects/{project}/spans``, followed page by page).

    Raises:
        SourceError: when Phoenix does not answer or has no such project.
    """
    base = url.rstrip("/") + f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    spans: list[dict[str, Any]] = []
    cursor = None
    while True:
        q = {"limit": page_size, **({"cursor": cursor} if cursor else {})}
        page = _get_json(f"{base}?{urllib.parse.urlencode(q)}", timeout=timeout)
        for sp in page.get("data") or ():
            attrs, ctx = dict(sp.get("attributes") or {}), sp.get("context") or {}
            if sp.get("span_kind"):
                attrs.setdefault("openinference.span.kind", sp["span_kind"])
            spans.append(
                {
                    "name": sp.get("name", ""),
                    "trace_id": ctx.get("trace_id", ""),
                    "span_id": ctx.get("span_id", ""),
                    "parent_span_id": sp.get("parent_id") or None,
                    "start_ns": _iso_ns(sp.get("start_time")),
                    "end_ns": _iso_ns(sp.get("end_time")),
                    "attributes": attrs,
                    "events": [
                        {"name": e.get("name", ""), "attributes": e.get("attributes") or {}}
                        for e in sp.get("events") or ()
                    ],
                    "links": [],
                }
            )
        if not (cursor := page.get("next_cursor")):
            return spans


def _camel_hex(obj: Any) -> Any:
    """MLflow's OTLP spans (proto field names, base64 ids) as OTLP/JSON (lowerCamelCase, hex ids)."""
    if isinstance(obj, list):
        return [_camel_hex(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {re.sub(r"_([a-z])", lambda m: m[1].upper(), k): _camel_hex(v) for k, v in obj.items()}
    for k in ("traceId", "spanId", "parentSpanId"):
        if isinstance(out.get(k), str):
            try:
                out[k] = base64.b64decode(out[k]).hex()
            except ValueError:
                pass
    return out


def load_mlflow(
    url: str, *, experiment_id: str = "0", run_id: str | None = None, timeout: float = 30.0, batch: int = 50
) -> list[dict[str, Any]]:
    """All spans of the traces of an MLflow experiment (``traces/search`` then ``traces/batchGet``).

    ``run_id`` only skips fetching traces tagged with another run; the report picks the run's spans.

    Raises:
        SourceError: when MLflow does not answer or the experiment does not exist.
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
            for sp in tr.get("spans") or ():  # MLflow writes kind, status and flags by name: left out
                doc = {k: v for k, v in _camel_hex(sp).items() if k not in ("kind", "status", "flags")}
                spans.append(flat_span(span_from_json(doc, resource, InstrumentationScope("mlflow"))))
    return spans
