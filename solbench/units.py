"""Number formatting shared by the terminal, the leaderboard, the report, the charts and the roll-up docs."""

from __future__ import annotations

import math

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"),
             (1e-9, "n"))


def si(x: float | None, unit: str = "", digits: int = 3) -> str:
    """With an SI prefix: 1.07e11 -> '107 G<unit>'; '-' for a missing value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return f"0 {unit}".strip()
    for scale, prefix in _PREFIXES:
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g} {prefix}{unit}".strip()
    return f"{x / 1e-9:.{digits}g} n{unit}".strip()


SOL_DIGITS = 3  # significant digits of a SOL wherever one is shown


def sol_text(x: float | None) -> str:
    """A SOL as a fraction of the speed of light, three significant digits, never an exponent:
    0.812, 1.00, 0.0500, 0.00123; '-' for a missing or non-finite value."""
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return "0"
    rounded = float(f"{x:.{SOL_DIGITS}g}")  # 0.09996 -> 0.1, so it prints 0.100 and not 0.1000
    decimals = max(0, SOL_DIGITS - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"
