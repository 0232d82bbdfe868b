"""The engine (trusted parent): runs candidates on workloads through workers, checks their outputs
against the reference, scores and records them. The run loop (``runner``) and its options
(``options``), cases, evaluation, correctness, scoring, environment, telemetry and calibration."""
