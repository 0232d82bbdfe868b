"""User-facing errors: one line that names the thing and the fix, never a traceback."""

from __future__ import annotations


class SolbenchError(Exception):
    """An error a user can cause and fix (bad file, unknown GPU, missing candidate).

    The CLI prints ``str(err)`` on one line and exits non-zero.
    """


class ExpressionError(SolbenchError):
    """An expression in a problem file is not allowed or cannot be evaluated."""


class ProblemError(SolbenchError):
    """A problem file is invalid. ``errors`` holds one line per problem found."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors) if self.errors else "invalid problem")


class SpecError(SolbenchError):
    """A hardware spec file is invalid or no spec matches."""

    def __init__(self, errors: list[str] | str):
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))
