"""Presentation of result records: the results frame and its selection (``frame``), ranking, the
leaderboard in every format, charts, the HTML report, and the text formatting they share."""

from __future__ import annotations

from solbench._lazy import lazy_getattr

# What the other layers use, by the module that defines it; a module is loaded on first use, so importing
# the package loads none of them.
_HOME = {
    "palette_for": "chart_style",
    "save": "chart_style",
    "to_bytes": "chart_style",
    "compare": "compare",
    "Selection": "frame",
    "load_results": "frame",
    "records_frame": "frame",
    "select_records": "frame",
    "history": "history",
    "display_tables": "leaderboard",
    "format_leaderboard": "leaderboard",
    "print_leaderboard": "leaderboard",
    "clean_text": "markup",
    "environment": "markup",
    "one_line": "markup",
    "TOLERANCE": "measured",
    "markdown_table": "measured",
    "measured_rows": "measured",
    "note_text": "measured",
    "model_figure": "model_chart",
    "ModelView": "model_view",
    "model_view": "model_view",
    "plots": "plots",
    "ranking": "ranking",
    "present_demo": "report",
    "write_report": "report",
    "roofline_figure": "roofline_chart",
    "inline_svg": "svg_marks",
}
__all__ = sorted(_HOME)


__getattr__ = lazy_getattr(__name__, _HOME)
