"""The report page: one HTML file with every figure inlined (SVG), the summary, the evaluations
with links to their videos, the metrics not drawn, and the drawn data as JSON
(``<script type="application/json" id="report-data">``, also written as ``report.json``). No
script runs and nothing is fetched from the network; the links point at the PNG/SVG files beside
the page and at the videos in the run directory."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from .figures import Figure
from .logs import Evaluation, Series

__all__ = ["PAGE", "DATA", "render_page"]

PAGE = "index.html"
DATA = "report.json"

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem auto;max-width:1100px;padding:0 1rem;color:#1d2733;background:#fff}
h1{font-size:1.4rem;margin-bottom:.2rem}h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid #d8dee6}
.meta{color:#5a6b7d;font-size:.9rem}pre{background:#f4f6f9;padding:.8rem;border-radius:4px;white-space:pre-wrap}
.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:.5rem 1rem}figure{margin:0}figure svg{width:100%;height:auto}figcaption{font-size:.85rem;color:#5a6b7d}
table{border-collapse:collapse;font-size:.85rem;width:100%}th,td{border-bottom:1px solid #e3e8ee;padding:.3rem .5rem;text-align:left}
.note{background:#fff8e1;padding:.6rem .8rem;border-left:3px solid #f0b400}
"""


def _escape_json(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True).replace("</", "<\\/")


def _svg_body(svg_text: str) -> str:
    """The ``<svg>`` element of a matplotlib SVG file (without its XML prologue and DOCTYPE)."""
    start = svg_text.find("<svg")
    return svg_text[start:] if start >= 0 else ""


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def report_data(summary_text: str, figures: list[Figure], evaluations: list[Evaluation], other: list[Series], video_base: str) -> dict:
    """What the page shows, as data (the golden report and the tests compare it)."""
    return {
        "summary": summary_text.splitlines(),
        "figures": [{"name": f.name, "title": f.title, "png": f.png, "svg": f.svg, "lines": f.lines} for f in figures],
        "evaluations": [
            {
                "name": e.name, "step": e.step, "status": e.status, "metrics": {k: round(v, 6) for k, v in sorted(e.metrics.items())},
                "videos": [f"{video_base}/{v}" if video_base else v for v in e.videos],
            }
            for e in evaluations
        ],  # fmt: skip
        "other": [{"tag": s.tag, "last_step": s.steps[-1], "last_value": round(s.values[-1], 6)} for s in other],
    }


def video_base(out: Path, run_dir: Path) -> str:
    """The run directory as seen from the page (relative, so the folder can be moved as one)."""
    return Path(os.path.relpath(run_dir.resolve(), out.resolve())).as_posix()


def render_page(title: str, meta: str, data: dict, figures: list[Figure], gpu_note: str) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">{html.escape(meta)}</p>',
        "<h2>Summary</h2>",
        f"<pre id=\"summary\">{html.escape(chr(10).join(data['summary']))}</pre>",
    ]
    if figures:
        parts.append('<h2>Curves</h2><div class="figures">')
    for figure in figures:
        parts += [
            f'<figure id="figure-{figure.name}">',
            _svg_body(figure.svg_text),
            f'<figcaption>{html.escape(figure.title)}: <a href="{html.escape(figure.png)}">PNG</a> '
            f'<a href="{html.escape(figure.svg)}">SVG</a></figcaption>',
            "</figure>",
        ]
    if figures:
        parts.append("</div>")
    parts.append("<h2>GPU utilisation</h2>")
    parts.append(f'<p class="note" id="gpu-note">{html.escape(gpu_note)}</p>')
    parts.append("<h2>Evaluations</h2>")
    if data["evaluations"]:
        parts.append("<table id=\"evaluations\"><tr><th>checkpoint</th><th>status</th><th>metrics</th><th>videos</th></tr>")
        for row in data["evaluations"]:
            metrics = "<br>".join(f"{html.escape(k)}: {_fmt(v)}" for k, v in row["metrics"].items()) or "none logged yet"
            videos = " ".join(f'<a class="video" href="{html.escape(v)}">{html.escape(v.rsplit("/", 1)[-1])}</a>' for v in row["videos"]) or "none"
            status = "running or not summarised" if row["status"] is None else str(row["status"])
            parts.append(f"<tr><td>{html.escape(row['name'])}</td><td>{status}</td><td>{metrics}</td><td>{videos}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No evaluation of this run yet (workload.mode: eval writes them to &lt;run dir&gt;/eval/step-N).</p>")
    if data["other"]:
        parts.append("<h2>Other metrics (not drawn)</h2><table id=\"other\"><tr><th>metric</th><th>last step</th><th>last value</th></tr>")
        for row in data["other"]:
            parts.append(f"<tr><td>{html.escape(row['tag'])}</td><td>{row['last_step']}</td><td>{_fmt(row['last_value'])}</td></tr>")
        parts.append("</table>")
    parts.append(f'<script type="application/json" id="report-data">{_escape_json(data)}</script>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
