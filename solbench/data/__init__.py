"""The data layer: problem and spec files, result records, and the math over them (no execution of
candidates). Problems (``problem``), specs (``hardware``), where both are found (``library``),
records and the results store (``record``, ``results``), expressions, dtypes, YAML I/O, validation,
roofline math, FLOP counting, input generation, and the model roll-up."""

from __future__ import annotations

import importlib
from typing import Any

# What the other layers use, by the module that defines it; a module is loaded on first use, so importing
# the package loads none of them.
_HOME = {
    "COST_SEED": "cost",
    "Cost": "cost",
    "cost_from_result": "cost",
    "cost_summary": "cost",
    "CPU_ESTIMATE_ID": "cpu_estimate",
    "cpu_count": "cpu_estimate",
    "cpu_model": "cpu_estimate",
    "Domain": "domain",
    "FORMAT_MAX": "domain",
    "apply_layout": "domain",
    "effective_domain": "domain",
    "layout_spec": "domain",
    "physical": "domain",
    "ITEMSIZE": "dtypes",
    "torch_dtype": "dtypes",
    "evaluate": "expr",
    "expr": "expr",
    "HardwareSpec": "hardware",
    "cpu_estimate_spec": "hardware",
    "detect_spec": "hardware",
    "is_spec_id": "hardware",
    "list_specs": "hardware",
    "load_spec": "hardware",
    "load_spec_id": "hardware",
    "measured_refinement": "hardware",
    "spec_dirs": "hardware",
    "spec_from_dict": "hardware",
    "scalar_value": "hookvalues",
    "whole_number": "hookvalues",
    "make_inputs": "inputs",
    "ImportRefused": "interop.flashinfer_trace",
    "import_definition": "interop.flashinfer_trace",
    "slug": "interop.flashinfer_trace",
    "read_json": "interop.flashinfer_trace",
    "import_solution": "interop.solutions",
    "export_traces": "interop.traces",
    "library_explanations": "library",
    "library_tags": "library",
    "problems_root": "library",
    "resolve_problem": "library",
    "NcuFormatError": "ncu",
    "parse_raw_csv": "ncu",
    "NOISY_CI95_REL": "noise",
    "NOISY_FLAG": "noise",
    "NOISY_P90_RATIO": "noise",
    "noisy_reason": "noise",
    "Problem": "problem",
    "Tolerance": "problem",
    "Workload": "problem",
    "find_problems": "problem",
    "inside_folder": "problem",
    "load_problem": "problem",
    "problem_from_dict": "problem",
    "problem_json_schema": "problem",
    "Profile": "profile",
    "failed_profile": "profile",
    "profile_from_kernels": "profile",
    "ResultRecord": "record",
    "Status": "record",
    "append_records": "results",
    "read_records": "results",
    "Phase": "rollup",
    "RollupError": "rollup",
    "Scenario": "rollup",
    "in_phase": "rollup",
    "layer_problems": "rollup",
    "scenario": "rollup",
    "workload_at": "rollup",
    "AnchoredScore": "roofline",
    "RooflinePoint": "roofline",
    "anchored_score": "roofline",
    "point": "roofline",
    "sol": "roofline",
    "workload_point": "roofline",
    "small_problem": "small",
    "collect_files": "validate",
    "validate_paths": "validate",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:  # PEP 562
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_HOME[name]}")
    return module if _HOME[name] == name else getattr(module, name)
