"""Hostile problem and spec files: each gets one line naming the file (and the key or line), never a
traceback, a hang, an allocator death or an escape sequence on the terminal (issue 14)."""

import copy
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from solbench.data.expr import LIMIT, evaluate
from solbench.data.hardware import load_spec_file
from solbench.data.problem import MAX_TENSOR_BYTES, load_problem
from solbench.data.validate import validate_paths
from solbench.data.yamlio import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, YamlError, read_yaml_mapping
from solbench.errors import ExpressionError, ProblemError, SpecError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_problem_file import GOOD, REF, write  # noqa: E402

TINY = HERE.parent / "fixtures" / "tiny" / "scaled_add"
HONEST = HERE.parent / "candidates" / "honest.py"


def one_line_error(path: Path, exc: type[Exception] = ProblemError, load=load_problem) -> str:
    with pytest.raises(exc) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg and "\n" not in msg and "Traceback" not in msg
    return msg


def problem(tmp_path: Path, mutate) -> Path:
    data = copy.deepcopy(GOOD)
    mutate(data)
    return write(tmp_path, data)


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in this process: exit code, stdout, stderr."""
    from solbench.cli import main

    monkeypatch.setattr(sys, "argv", ["solbench", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


# --- 1. size, nesting, aliases: bounded before or while parsing ---------------------------------------

def test_a_file_over_the_size_cap_is_refused_at_once(tmp_path):
    f = tmp_path / "problem.yaml"
    f.write_text("description: '" + "x" * (MAX_FILE_BYTES + 10) + "'\n")
    start = time.process_time()  # this process's CPU time: a loaded machine cannot fail it, a parse would
    msg = one_line_error(f)
    assert "larger than 1 MiB" in msg and time.process_time() - start < 1


@pytest.mark.parametrize("text", [
    "a: " + "[" * 100_000 + "]" * 100_000,  # flow: a RecursionError in `validate` and `run` before
    "a:\n" + "".join(" " * i + "- \n" for i in range(1, 200)),  # block
    "".join(" " * i + f"k{i}:\n" for i in range(200)),
    "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [[*a{i - 1}]]\n" for i in range(1, 40)),  # deep through aliases
])
def test_deep_nesting_is_refused_with_the_line(tmp_path, text):
    f = tmp_path / "problem.yaml"
    f.write_text(text)
    msg = one_line_error(f)
    assert f"nested more than {MAX_DEPTH} levels deep" in msg and "line " in msg


@pytest.mark.parametrize(("text", "expect"), [
    ("a0: &a0 [1,1,1,1,1,1,1,1,1,1]\n"
     + "".join(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
     "aliases counted expanded"),  # a billion laughs: 10^9 values from 200 bytes
    ("a: [" + ",".join(["1"] * (MAX_NODES + 10)) + "]", f"more than {MAX_NODES} values"),
    ("a: &x [*x]", "recursive alias"),
    ("? [1]\n: 2\n", "a key must be a plain value"),
    ("a: !!timestamp 2024-13-45", "YAML type 'timestamp' is not allowed"),
    ("a: !!binary aGVsbG8=", "YAML type 'binary' is not allowed"),
    ("a: !!set {x}", "YAML type 'set' is not allowed"),
    ("a: " + "1" * 5000, "bad value (Exceeds the limit"),
    ('name: "a\\e[31mred"', "control character U+001B"),
    ('name: "a\\rb"', "control character U+000D"),
    ('name: "\\u202eevil"', "control character U+202E"),
    ('name: "x\\x85y"', "control character U+0085"),
])
def test_hostile_yaml_is_refused_with_the_line(tmp_path, text, expect):
    f = tmp_path / "problem.yaml"
    f.write_text(text)
    start = time.process_time()  # CPU time, not wall time: under load the wall clock read 5 s for a fast refusal
    msg = one_line_error(f)
    assert expect in msg and "line " in msg
    assert time.process_time() - start < 2


def test_unreadable_files_are_one_line(tmp_path):
    binary = tmp_path / "problem.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    assert "not UTF-8" in one_line_error(binary)
    fifo = tmp_path / "fifo" / "problem.yaml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    with pytest.raises(YamlError, match="not a regular file"):
        read_yaml_mapping(fifo)  # would block forever in read()


def test_spec_files_have_the_same_bounds(tmp_path):
    f = tmp_path / "h999.yaml"
    f.write_text("id: h999\nname: " + "[" * 1000 + "]" * 1000 + "\n")
    assert "nested more than" in one_line_error(f, SpecError, load_spec_file)
    f.write_text('id: h999\nname: "\\e]0;pwned\\a"\n')
    assert "control character" in one_line_error(f, SpecError, load_spec_file)


def test_validate_and_run_of_a_deep_file_say_one_line(tmp_path, monkeypatch, capsys):
    f = tmp_path / "problem.yaml"
    f.write_text("a: " + "[" * 50_000 + "]" * 50_000)
    code, _, err = _main(monkeypatch, capsys, "validate", str(f))
    assert code == 1 and "nested more than" in err and "Traceback" not in err
    code, _, err = _main(monkeypatch, capsys, "run", str(f), "-s", str(HONEST), "--device", "cpu")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nested more than" in err


# --- 2. expressions: finite and below 2^63, the expression named --------------------------------------

@pytest.mark.parametrize(("flops", "fragment"), [
    ("1e308 * 10", "1e+308 is out of range"),
    (" * ".join(["123456789"] * 80), "= about 2^80 is out of range"),
    ("ceil(1e308*1e308)", "1e+308 is out of range"),
    ("T * 2**62", "out of range"),
    ("(-8) ** 0.5 * T", "is not a real number"),
    ("9.0 ** 63.9", "out of range"),
    ("min(T)", "min() takes at least 2 arguments"),
    ("-" * 500 + "T", "nested more than"),
])
def test_absurd_formulas_fail_validation_naming_the_expression(tmp_path, flops, fragment):
    msg = one_line_error(problem(tmp_path, lambda d: d.update(flops=flops)))
    assert "flops" in msg and fragment in msg and "expression '" in msg


def test_sol_of_an_overflowing_formula_is_one_line(tmp_path, monkeypatch, capsys):
    f = problem(tmp_path, lambda d: d.update(bytes="ceil(1e308*1e308)"))
    code, _, err = _main(monkeypatch, capsys, "sol", str(f), "--gpu", "h200_sxm")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "out of range" in err


def test_every_step_is_bounded_not_only_the_result():
    assert evaluate("2**62 + (2**62 - 1)", {}) == LIMIT - 1
    with pytest.raises(ExpressionError, match="2 \\*\\* 62 \\* 4"):
        evaluate("2**62 * 4 // 8", {})  # the result would fit; the step does not
    with pytest.raises(ExpressionError, match="T = about 2\\^"):
        evaluate("T // T", {"T": 10**5000})  # a name's value is a step too


def test_huge_axis_values_are_refused_as_sizes(tmp_path):
    msg = one_line_error(problem(tmp_path, lambda d: d["workloads"][0]["axes"].update(T=2**63)))
    assert "workloads[0] (small).axes.T" in msg and "too large" in msg


# --- 3. tensors that could not exist; workloads that do not fit this machine ---------------------------

def test_shapes_of_1e18_elements_fail_validation(tmp_path):
    msg = one_line_error(problem(tmp_path, lambda d: d.update(flops="1")
                                 or d["workloads"][0]["axes"].update(T=10**18)))
    assert "inputs.x: shape (1000000000000000000, 128) of bfloat16" in msg and "1 TiB (2^40 bytes)" in msg


def test_a_workload_whose_tensors_together_exceed_the_cap_fails(tmp_path):
    # Each tensor is 0.6 TiB, under the cap; inputs and outputs together are 1.2 TiB.
    rows = int(0.6 * MAX_TENSOR_BYTES) // (128 * 2)
    msg = one_line_error(problem(tmp_path, lambda d: d["workloads"][0]["axes"].update(T=rows)))
    assert "inputs and outputs:" in msg and "together" in msg


def test_run_refuses_a_workload_that_cannot_fit_this_machine(tmp_path, monkeypatch, capsys):
    # 2^27 rows x 64 float32: 32 GiB per tensor, 96 GiB for x, y and out: valid, but not for 8 GiB free.
    src = (TINY / "problem.yaml").read_text().replace("{N: 4}", "{N: 134217728}")
    (tmp_path / "problem.yaml").write_text(src)
    (tmp_path / "reference.py").write_text((TINY / "reference.py").read_text())
    assert validate_paths([tmp_path]) == (1, [])
    import solbench.engine.cases as cases

    monkeypatch.setattr(cases, "available_memory", lambda device: 8 << 30)
    code, _, err = _main(monkeypatch, capsys, "run", str(tmp_path), "--workload", "n4", "-s", str(HONEST),
                         "--device", "cpu", "-o", str(tmp_path / "r.jsonl"), "-q")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "workload n4: needs at least 576.0 GiB" in err and "8.0 GiB free" in err


def test_an_allocation_failure_while_making_inputs_is_a_problem_error(monkeypatch):
    import solbench.engine.cases as cases
    from solbench.engine.problem_code import load_reference

    p = load_problem(TINY)

    def no_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: 1 TB")

    monkeypatch.setattr(cases, "make_case", no_memory)
    with pytest.raises(ProblemError, match="workload n4: its inputs and reference outputs do not fit in cpu memory"):
        cases.prepare_cases(p, p.workload("n4"), base_seed=1, device="cpu", rounds=3,
                            ref_fn=load_reference(p), gen_fn=None)


# --- 4. names; nothing reaches the terminal raw ---------------------------------------------------------

@pytest.mark.parametrize("name", ["two words", "a/b", "x" * 65, "-lead", "[red]x", "é"])
def test_workload_names_follow_the_pattern(tmp_path, name):
    msg = one_line_error(problem(tmp_path, lambda d: d["workloads"][0].update(name=name)))
    assert "workloads[0]" in msg and "a workload name is a letter or digit" in msg


def test_tags_follow_the_pattern(tmp_path):
    msg = one_line_error(problem(tmp_path, lambda d: d.update(tags=["ok", "not ok"])))
    assert "tags[1]" in msg


def test_the_console_shows_control_characters_as_replacement_characters():
    import io

    from rich.table import Table

    from solbench.cli._common import SafeConsole, plain

    buf = io.StringIO()
    console = SafeConsole(file=buf, force_terminal=True, color_system="truecolor", width=80)
    console.print("a\x1b]0;pwned\x07b \x1b[2J \u202eevil", style="bold")
    table = Table()
    table.add_column("reason")
    table.add_row(plain("[link=https://evil.example]click[/link] \x1b[31m"))
    console.print(table)
    out = buf.getvalue()
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\x1b[31m" not in out and "\u202e" not in out
    assert "[link=https://evil.example]click" in out  # shown as text, not made a hyperlink


def test_error_lines_are_cleaned(monkeypatch, capsys):
    from solbench.errors import SolbenchError

    def boom():
        raise SolbenchError("candidate \x1b[2J\x1b]0;pwned\x07 not found")

    monkeypatch.setattr("solbench.cli._app.app", lambda **kw: boom())
    from solbench.cli._app import main

    with pytest.raises(SystemExit):
        main()
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "candidate" in err


def test_run_progress_and_tables_escape_candidate_names(tmp_path, monkeypatch, capsys):
    cand = tmp_path / "[bold]\x1b[31mx.py"
    cand.write_text(HONEST.read_text())
    code, out, err = _main(monkeypatch, capsys, "run", str(TINY), "--workload", "n4", "-s", str(cand),
                           "--device", "cpu", "-o", str(tmp_path / "r.jsonl"), "--budget", "0.05")
    assert code == 0, err
    # The name is escaped where it becomes a name (solbench.worker.candidate.printable_name), and rich
    # markup in it is shown as text, in the table and the progress line alike.
    assert "\x1b" not in out + err
    assert "[bold]\\x1b[31mx" in out and "[bold]\\x1b[31mx: PASSED" in err


# --- 5. references by real path ----------------------------------------------------------------------------

def test_a_symlinked_reference_pointing_outside_is_refused(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text(REF)
    folder = tmp_path / "p"
    folder.mkdir()
    f = write(folder, GOOD, ref=None)
    (folder / "reference.py").symlink_to(outside)
    msg = one_line_error(f)
    assert "reference: 'reference.py' is a link to" in msg and "outside the problem's folder" in msg


def test_a_symlink_inside_the_folder_is_fine(tmp_path):
    f = write(tmp_path, GOOD, ref=None)
    (tmp_path / "impl.py").write_text(REF)
    (tmp_path / "reference.py").symlink_to(tmp_path / "impl.py")
    assert load_problem(f).reference_function == "run"


def test_loading_the_reference_checks_the_real_path_again(tmp_path):
    from solbench.engine.problem_code import load_reference

    folder = tmp_path / "p"
    folder.mkdir()
    p = load_problem(write(folder, GOOD))
    (tmp_path / "outside.py").write_text(REF)
    (folder / "reference.py").unlink()
    (folder / "reference.py").symlink_to(tmp_path / "outside.py")  # swapped after validation
    with pytest.raises(ProblemError, match="resolves outside the problem's folder"):
        load_reference(p)


@pytest.mark.parametrize(("content", "fragment"), [
    (b"\xff\xfe def run(x, eps): pass", "cannot read reference.py (UnicodeDecodeError)"),
    (b"def run(x, eps):\n    return x\x00\n", "reference.py cannot be parsed"),
])
def test_unreadable_references_are_one_line(tmp_path, content, fragment):
    f = write(tmp_path, GOOD, ref=None)
    (tmp_path / "reference.py").write_bytes(content)
    msg = one_line_error(f)
    assert fragment in msg or "syntax error" in msg


def test_yaml_dump_of_the_good_problem_still_loads(tmp_path):
    # The bounds leave ordinary files alone: the fixture and every shipped file (tests/library) load.
    assert load_problem(write(tmp_path, GOOD)).name == "toy.add_residual"
    assert yaml.safe_load((TINY / "problem.yaml").read_text())["name"] == "tiny.scaled_add"
