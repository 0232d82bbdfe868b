"""A run's identity: its id and its secret base seed, made once and passed to every part of the run."""

from __future__ import annotations

import secrets
import uuid

from pydantic import BaseModel, ConfigDict, Field


class RunIdentity(BaseModel):
    """One run id and one base seed for every record of a run (every executor, every candidate), so
    every candidate sees the same inputs. The base seed is secret unless given: never written while
    the run goes on, so no candidate can read it from an earlier record and predict its inputs."""

    model_config = ConfigDict(frozen=True)

    run_id: str = Field(min_length=1, max_length=64)
    base_seed: int

    @classmethod
    def new(cls, seed: int | None = None) -> RunIdentity:
        """A fresh run id; the base seed given (``--seed``), else a random one."""
        return cls(run_id=uuid.uuid4().hex[:12], base_seed=seed if seed is not None else secrets.randbits(63))
