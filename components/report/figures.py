"""The figures: one per metric group (matplotlib, Agg backend), each written as PNG and SVG.

What a figure shows is read back from matplotlib's own line objects after drawing
(:attr:`Figure.lines`), so the page's embedded data is the plotted data, not a second copy.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from .logs import Series
from .metrics import GROUPS

__all__ = ["Figure", "draw"]

FIGURES_DIR = "figures"


@dataclass
class Figure:
    name: str
    title: str
    png: str
    svg: str
    """Paths relative to the report folder."""
    svg_text: str
    lines: list[dict] = field(default_factory=list)
    """``{"label", "x", "y"}`` of each drawn line, read from matplotlib."""


def _matplotlib():
    try:
        import matplotlib
    except ImportError as err:  # the CLI checks first; a library caller gets the same advice
        raise ImportError("the report needs matplotlib: pip install 'rlinf-eks[report]'") from err
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return matplotlib, plt


def draw(groups: dict[str, list[Series]], out: Path) -> list[Figure]:
    """One figure per group with series, in GROUPS order, into ``out/figures``."""
    matplotlib, plt = _matplotlib()
    folder = out / FIGURES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    for group in GROUPS:
        members = groups.get(group.name)
        if not members:
            continue
        # reproducible SVG ids (and no clash between the figures inlined in one page)
        with matplotlib.rc_context({"svg.hashsalt": f"rlinf-eks-{group.name}", "svg.fonttype": "path", "font.size": 9}):
            fig, ax = plt.subplots(figsize=(7.0, 3.4), dpi=100)
            for series in members:
                marker = "o" if len(series.points) <= 20 else None
                ax.plot(series.steps, series.values, label=series.tag, marker=marker, markersize=3, linewidth=1.4)
            ax.set_title(group.title)
            ax.set_xlabel("step")
            ax.set_ylabel(group.ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="best", fontsize=7, frameon=False)
            fig.tight_layout()
            lines = [
                {"label": line.get_label(), "x": [int(v) for v in line.get_xdata()], "y": [float(v) for v in line.get_ydata()]}
                for line in ax.get_lines()
            ]
            png, svg = f"{FIGURES_DIR}/{group.name}.png", f"{FIGURES_DIR}/{group.name}.svg"
            fig.savefig(out / png, format="png", metadata={"Software": None})
            buffer = io.StringIO()
            fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
            plt.close(fig)
        svg_text = buffer.getvalue()
        (out / svg).write_text(svg_text, encoding="utf-8")
        figures.append(Figure(group.name, group.title, png, svg, svg_text, lines))
    return figures
