#!/usr/bin/env bash
# Every wheel a device call carries in .whl/ that the GPU image lacks: solbench's own pydantic, Liger
# (the baselines), py-spy and `solbench serve`'s stack (the image has anyio, h11, idna, click, jinja2,
# markupsafe, typing-extensions, annotated-doc),
# into .whl/ (ignored by git) for Python 3.12 on x86-64. Versions: the ones the tests ran with.
# SQLAlchemy is the one compiled wheel; psycopg is left out (the check uses SQLite). FastAPI imports
# opentelemetry-api at start-up (a hard requirement of it since 0.16x). py-spy: scripts/hang_probe.sh's stacks.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl \
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 sqlalchemy==2.1.9 alembic==1.20.1 mako==1.4.3 \
  annotated-doc==0.0.7 typing-inspection==0.4.2 opentelemetry-api==1.45.2 py-spy==0.4.3 \
  pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 liger-kernel==0.8.5 fla-core==0.6.0
ls .whl
