#!/usr/bin/env bash
# One call on the lent H200 runs the steps named on the command line, e.g.
#   bash scripts/h200_session.sh env timing_smoke kernels run_library
# Carried wheels (.whl/, pydantic: not in the GPU image) are installed to /tmp/site. Everything a
# step writes under results/ is packed into $OUT/results.tgz; logs go to $OUT/*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/solbench_out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
sb() { python3 -m solbench "$@"; }
STAMP=$(date -u +%Y-%m-%d)

step() {
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@" > >(tee -a "$OUT/$name.log") 2>&1
  local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s"
}

for s in "$@"; do
  case $s in
    env)
      step env bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv;
        python3 -c "import torch, triton, sys; print(sys.version); print(torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.get_device_name())";
        python3 -c "import cupy; print(\"cupy\", cupy.__version__)"; python3 -c "import pydantic; print(\"pydantic\", pydantic.__version__)"' ;;
    unit)
      step unit python3 -m pytest -q -x --timeout 300 -p no:cacheprovider tests/library/test_every_problem.py tests/data/test_roofline.py ;;
    timing_smoke)
      step timing_smoke python3 benchmarks/gpu_timing_smoke.py --json "$OUT/timing_smoke.json" ;;
    kernels)
      step kernels python3 benchmarks/gpu_kernels_check.py ;;
    show)
      # issue 4's "Show": the seed o_proj + residual with eager, torch.compile and two Triton
      # candidates; rmsnorm (memory-bound) with eager, Triton and a CuPy RawKernel.
      P=problems/llama3_1_8b
      S=$P/attn_o_proj_residual/solutions
      step show_o_proj timeout ${SHOW_TIMEOUT:-200} python3 -m solbench run llama3_1_8b.attn_o_proj_residual \
        -s $S/torch_eager.py -s $S/torch_compile.py -s $S/triton_gemm_residual.py -s $S/triton_tma_gemm_residual.py \
        --workload decode_b16 --workload prefill_b4_s2048 --workload prefill_b2_s8192 -o "results/h200/show_$STAMP.jsonl"
      step show_rmsnorm timeout ${SHOW_TIMEOUT:-200} python3 -m solbench run llama3_1_8b.rmsnorm \
        -s $P/rmsnorm/solutions/torch_eager.py -s $P/rmsnorm/solutions/triton_rmsnorm.py -s tests/candidates/gpu_cupy_rmsnorm.py \
        -o "results/h200/show_$STAMP.jsonl" ;;
    gpu_tests)
      step gpu_tests timeout ${GPU_TESTS_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -rs tests/guards tests/timing tests/worker
      step gpu_cli timeout ${GPU_TESTS_TIMEOUT:-150} python3 -m pytest -q -p no:cacheprovider -rs tests/cli/test_run_command.py -k gpu ;;
    sandbox_gpu)
      # workers run as nobody under Landlock reads and seccomp: CUDA must work there first
      step sandbox_gpu timeout ${SANDBOX_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -rs \
        tests/worker/test_worker_sandbox.py tests/cli/test_run_command.py -k gpu
      if grep -q "failed" "$OUT/sandbox_gpu.log"; then
        echo "=== sandbox_gpu failed: the later steps run their workers as root"; export SOLBENCH_WORKER_USER=root
      fi ;;
    adversarial_gpu)
      step adversarial_gpu env SOLBENCH_ADVERSARIAL_DEVICE=cuda SOLBENCH_SLOW=1 timeout ${ADV_TIMEOUT:-300} \
        python3 -m pytest -q -p no:cacheprovider -rA tests/adversarial ${ADV_K:+-k "$ADV_K"}
      cp "$OUT/adversarial_gpu.log" "results/h200/adversarial_gpu_$STAMP.log" ;;
    ncu_probe)
      # raw Nsight Compute outputs for the profile parser's CPU tests (tests/fixtures/ncu/)
      mkdir -p "$OUT/ncu"
      step ncu_probe bash -c 'ncu --list-sections > "$OUT/ncu/sections.txt" 2>&1;
        ncu --query-metrics --chip gh100 2>/dev/null | grep -E "^(dram__bytes|lts__t_bytes|l1tex__t_bytes|sm__sass_thread_inst_executed_op|sm__inst_executed_pipe_tensor|sm__pipe_tensor|sm__ops_path_tensor|smsp__sass_thread_inst_executed_op|sm__throughput|gpu__compute_memory_throughput|sm__warps_active|dram__throughput|gpu__time_duration)" > "$OUT/ncu/query_metrics_gh100.txt";
        timeout 240 ncu --clock-control none --target-processes all --set full --nvtx -o "$OUT/ncu/probe" -f python3 scripts/ncu_probe_target.py > "$OUT/ncu/run.log" 2>&1; echo "ncu rc=$?";
        ncu --import "$OUT/ncu/probe.ncu-rep" --page raw --csv > "$OUT/ncu/probe_raw.csv";
        ncu --import "$OUT/ncu/probe.ncu-rep" --page details --csv > "$OUT/ncu/probe_details.csv";
        timeout 120 ncu --clock-control none --target-processes all --nvtx --nvtx-include "rmsnorm_eager/" --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,l1tex__t_bytes.sum --csv --page raw python3 scripts/ncu_probe_target.py > "$OUT/ncu/nvtx_filtered_raw.csv" 2>&1; echo "nvtx rc=$?";
        ls -la "$OUT/ncu"; head -c 600 "$OUT/ncu/probe_raw.csv"' ;;
    timing_probe)
      step timing_probe timeout ${PROBE_TIMEOUT:-150} python3 benchmarks/timing_cost_probe.py --out "results/h200/timing_cost_probe_$STAMP.txt"
      step parent_profile timeout ${PROBE_TIMEOUT:-150} python3 -m cProfile -o "$OUT/parent.prof" -m solbench run llama3_1_8b.rmsnorm \
        -s problems/llama3_1_8b/rmsnorm/solutions/torch_eager.py --workload decode_b1 --workload decode_b16 --workload prefill_b1_s2048 -o "$OUT/parent_probe.jsonl"
      python3 -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats(\"cumulative\").print_stats(45)" "$OUT/parent.prof" > "results/h200/parent_profile_$STAMP.txt" 2>&1
      python3 -c "import json,sys; [print(r[\"workload\"], r[\"status\"], json.dumps(r.get(\"harness\"))) for r in map(json.loads, open(sys.argv[1]))]" "$OUT/parent_probe.jsonl" | tee -a "results/h200/parent_profile_$STAMP.txt" ;;
    landlock_probe)
      step landlock_probe timeout 200 python3 scripts/landlock_cuda_probe.py ;;
    run_seed)
      step run_seed sb run llama3_1_8b.attn_o_proj_residual llama3_1_8b.rmsnorm -o "results/h200/seed_$STAMP.jsonl" ;;
    run_library)
      # eager + Triton for every problem, time-boxed (records are written as they finish)
      step run_library timeout ${LIB_TIMEOUT:-420} python3 scripts/run_library.py -o "results/h200/library_$STAMP.jsonl" --include 'torch_eager*' 'triton_*' --first 'llama3_1_8b.*' --timeout 60 ${LIB_ARGS:-} ;;
    run_compile)
      step run_compile timeout ${COMPILE_TIMEOUT:-240} python3 scripts/run_library.py -o "results/h200/library_$STAMP.jsonl" --include 'torch_compile*' --only 'llama3_1_8b.*' ;;
    calibrate)
      mkdir -p hardware_specs/measured
      step calibrate sb calibrate -o hardware_specs/measured/h200_sxm_measured.yaml ;;
    fidelity)
      step fidelity timeout ${FIDELITY_TIMEOUT:-240} python3 benchmarks/timing_fidelity.py --out "results/h200/timing_fidelity_$STAMP.json" ;;
    overhead)
      # the all-stream CUPTI timer against events only, same problems and candidates, back to back
      step overhead_all timeout ${OVERHEAD_TIMEOUT:-150} python3 benchmarks/harness_overhead.py ${OVERHEAD_ARGS:-} -o "results/h200/harness_overhead_all_streams_$STAMP.json"
      step overhead_events timeout ${OVERHEAD_TIMEOUT:-150} python3 benchmarks/harness_overhead.py ${OVERHEAD_ARGS:-} --events-only -o "results/h200/harness_overhead_events_only_$STAMP.json" ;;
    library_check)
      # every shipped eager and Triton candidate at each problem's smallest and largest workload:
      # false positives of the guards and the timer (time-boxed; records are written as they finish)
      step library_check timeout ${LIB_TIMEOUT:-300} python3 scripts/run_library.py -o "results/h200/library_check_$STAMP.jsonl" --include 'torch_eager*' 'triton_*' --extremes --budget 0.3 ${LIB_ARGS:-} ;;
    adversarial)
      step adversarial python3 -m pytest -q -p no:cacheprovider tests/adversarial -m gpu ;;
    report)
      step report bash -c "python3 -m solbench report results/h200 -o results/h200/report.html && python3 -m solbench plot roofline results/h200 -o results/h200/roofline.png --gpu h200_sxm" ;;
    *)
      echo "unknown step $s" ;;
  esac
done
tar czf "$OUT/results.tgz" results hardware_specs/measured 2>/dev/null || tar czf "$OUT/results.tgz" results
ls -la "$OUT"
