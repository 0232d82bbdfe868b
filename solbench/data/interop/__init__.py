"""Converters between solbench and its peers' formats: FlashInfer-Trace (definitions, workloads,
solutions, traces; SOL-ExecBench uses the same) and KernelBench modules."""
