"""The worker: the only process that runs candidate code (``python -m solbench.worker``), the
parent's handle on it (``client``), the byte format between them (``wire``) and candidate loading."""
