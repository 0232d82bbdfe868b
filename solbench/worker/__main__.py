"""`python -m solbench.worker`: the worker process entry point."""

from solbench.worker.main import main

main()
