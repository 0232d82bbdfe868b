"""What a guard reports: a :class:`Finding` (kind, verdict, one-line reason) and how verdicts combine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

REWARD_HACK = "REWARD_HACK"
INCORRECT = "INCORRECT"
Verdict = Literal["REWARD_HACK", "INCORRECT"]
# A reward hack outranks a wrong answer: it says why the answer cannot be trusted at all.
_RANK = {REWARD_HACK: 2, INCORRECT: 1}


@dataclass(frozen=True)
class Finding:
    """One thing a guard saw. ``reason`` is the one line a user reads in the record."""

    kind: str
    status: Verdict
    reason: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)  # JSON-able, for the parent

    def __post_init__(self) -> None:
        if self.status not in _RANK:
            raise ValueError(f"Finding.status must be {REWARD_HACK} or {INCORRECT}, not {self.status!r}")
        # Records show the reason on one line; a reason built from candidate data must not break that.
        one_line = " ".join(str(self.reason).split())
        object.__setattr__(self, "reason", one_line[:500] or self.kind)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding | None:
        """A Finding from a dict sent by a worker, or None if it is not one (workers are untrusted)."""
        try:
            kind, status, reason = data["kind"], data["status"], data["reason"]
        except (KeyError, TypeError):
            return None
        if not (isinstance(kind, str) and isinstance(reason, str) and status in _RANK):
            return None
        details = data.get("details")
        return cls(kind[:100], status, reason, details if isinstance(details, dict) else {})


def worst(findings: Iterable[Finding]) -> Finding | None:
    """The finding that decides the verdict: the first of the highest rank (REWARD_HACK first)."""
    best: Finding | None = None
    for f in findings:
        if best is None or _RANK[f.status] > _RANK[best.status]:
            best = f
    return best

