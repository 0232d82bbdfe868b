"""Converters between solbench and its peers' formats: FlashInfer-Trace (definitions, workloads,
solutions, traces; SOL-ExecBench uses the same). The KernelBench import, which runs the module it
reads, is :mod:`solbench.engine.kernelbench`."""
