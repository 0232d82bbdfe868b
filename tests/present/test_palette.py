"""A candidate keeps its colour from chart to chart of one result set."""

from __future__ import annotations

import matplotlib as mpl
from matplotlib.collections import PathCollection
from record_factory import make_recordset

from solbench.present.chart_style import candidate_styles, palette_for
from solbench.present.frame import records_frame
from solbench.present.roofline_chart import roofline_figure


def test_palette_in_force_gives_one_colour_per_candidate_whatever_the_order():
    with palette_for(["b", "a", "c"]):
        assert candidate_styles(["c", "a"])["c"] == candidate_styles(["a", "b", "c"])["c"]
    assert candidate_styles(["c", "a"])["c"] != candidate_styles(["a", "c"])["c"]  # outside: by the order given


def _point_colours(fig) -> set[str]:
    return {mpl.colors.to_hex(c) for ax in fig.axes for coll in ax.collections if isinstance(coll, PathCollection)
            for c in coll.get_facecolors()}


def test_a_chart_of_one_candidate_uses_its_colour_from_the_whole_set():
    df = records_frame([r.model_dump(mode="json") for r in make_recordset(with_measured=False).records])
    df = df[df["gpu"] == sorted(df["gpu"].unique())[0]]
    passed = df[df["status"] == "PASSED"]
    names = sorted(df["solution"].unique())
    last = names[-1]  # alone on a chart it would get the first colour; in the set it has its own
    alone = df[(df["solution"] == last) & (df["problem"] == passed[passed["solution"] == last]["problem"].iloc[0])]
    with palette_for(df["solution"]):
        expected = candidate_styles(names)[last].color
        colours = _point_colours(roofline_figure(alone))
    assert expected in colours and candidate_styles([last])[last].color not in colours
