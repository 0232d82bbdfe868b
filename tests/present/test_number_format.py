"""The one SOL formatter and the one SI formatter (solbench.units), checked against independent rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import record_factory as rf

from solbench.units import si, sol_text


def test_sol_text_is_three_significant_digits_written_out():
    values = [*np.logspace(-7, 4, 4001), 0.09996, 0.9995, 999.6, 0.5, 1.0, 1.7]
    for x in map(float, values):
        text = sol_text(x)
        assert text == rf.expected_sol(x), x
        assert "e" not in text and "%" not in text
        assert float(text) == pytest.approx(x, rel=5e-3)  # within half a unit of the third digit


@pytest.mark.parametrize("x, text", [(0.812, "0.812"), (1.0, "1.00"), (0.05, "0.0500"), (0.0013, "0.00130"),
                                     (1.1e-05, "0.0000110"), (0.00041, "0.000410"), (12.345, "12.3"),
                                     (0.0, "0"), (None, "-"), (math.nan, "-"), (math.inf, "-")])
def test_sol_text_examples(x, text):
    assert sol_text(x) == text


@pytest.mark.parametrize("x, unit, text", [(1.07e11, "FLOP/s", "107 GFLOP/s"), (4.8e12, "B/s", "4.8 TB/s"),
                                           (2.5e-6, "s", "2.5 µs"), (0, "s", "0 s"), (None, "s", "-")])
def test_si(x, unit, text):
    assert si(x, unit) == text


def test_one_name_each():
    from solbench.present import markup

    assert not hasattr(markup, "fmt_si") and not hasattr(markup, "fmt_sol")
    assert markup.environment().filters["sol"] is sol_text and markup.environment().filters["si"] is si


def test_report_cells_give_each_rate_its_own_prefix():
    """A CPU's rates read as 265 MFLOP/s and 1.4 GB/s, not 0.000265 TFLOP/s and 0.0014 TB/s."""
    from solbench.present.report_data import _cell

    best = {"sol": 0.01, "time_s": 1e-4, "achieved_flops_per_s": 2.65e8, "achieved_bytes_per_s": 1.4e9}
    cell = _cell(best, None)
    assert (cell.tflops, cell.tbps) == ("265 MFLOP/s", "1.4 GB/s")
    h200 = _cell({**best, "achieved_flops_per_s": 7.31e14, "achieved_bytes_per_s": 4.1e12}, None)
    assert (h200.tflops, h200.tbps) == ("731 TFLOP/s", "4.1 TB/s")
