#!/usr/bin/env bash
# One call on the lent H200 runs the steps named on the command line, e.g.
#   bash scripts/h200_session.sh env timing_smoke kernels run_library
# Carried wheels (.whl/, pydantic: not in the GPU image) are installed to /tmp/site; .whl/ is ignored by git, so
# the device call must name it (carry [".whl"]: without it every step stops at `import pydantic`). Everything a
# step writes under results/ is packed into $OUT/results.tgz; logs go to $OUT/*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/solbench_out}
mkdir -p "$OUT"
# results go to a folder per GPU: the H200 or, when an H100 is lent instead, results/h100/
RES=results/h200
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H100 && RES=results/h100
mkdir -p "$RES"
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
  # packed after every step: a call cut off by its limit still brings back what finished
  tar czf "$OUT/results.tgz" $RES 2>/dev/null
  return $rc
}

# While a long step runs: where its records file stops growing for STALL_S seconds (STALL_FIRST_S
# before its first record: the start, workers and problem hosts at once, takes ~40 s on the H200), every
# Python process's stacks (py-spy, carried in .whl/) go to $OUT/NAME.stacks.txt, at most twice: a hang
# leaves its cause, and a run that flows is not paused by a dump.
stall_watch() {
  local name=$1 file=$2 last=-1 still=0 dumps=0 spy limit
  spy=$(command -v py-spy || echo /tmp/site/bin/py-spy)
  while [ $dumps -lt 2 ]; do
    sleep 5
    local size; size=$(stat -c %s "$file" 2>/dev/null || echo 0)
    if [ "$size" = "$last" ]; then still=$((still + 5)); else still=0; last=$size; fi
    limit=${STALL_S:-45}; [ "$size" -gt 0 ] || limit=${STALL_FIRST_S:-120}
    [ $still -ge $limit ] || continue
    still=0; dumps=$((dumps + 1))
    { echo "##### $name: $file unchanged for $limit s at $(date -u +%T)"
      ps -N --ppid 2 -o pid,ppid,user,stat,wchan:28,etimes,pcpu,rss,args --forest | grep -v " ps -N" | cut -c1-220
      for p in $(pgrep -f python3); do
        echo "----- pid $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-160)"
        timeout 20 "$spy" dump --native --pid "$p" 2>&1 | head -80
      done; } >> "$OUT/$name.stacks.txt" 2>&1
  done
}

# While the throughput step runs: where the parent's time goes (py-spy, sampled: all its busy threads,
# then only the one holding the GIL), the device's busy share each second (nvidia-smi dmon) and the
# host's cores (top), under results/h200/diag_STAMP/ (packed with the results).
load_watch() {
  local dir=$RES/diag_$STAMP spy pid
  mkdir -p "$dir"
  spy=$(command -v py-spy || echo /tmp/site/bin/py-spy)
  timeout ${LOAD_WATCH_S:-400} nvidia-smi dmon -s u -d 1 > "$dir/dmon.txt" 2>&1 &
  timeout ${LOAD_WATCH_S:-400} top -b -d 20 -w 200 > "$dir/top.txt" 2>&1 &
  sleep ${SPY_AFTER_S:-80}
  pid=$(pgrep -f "^python3 benchmarks/library_throughput.py" | head -1)
  [ -n "$pid" ] || return
  timeout 60 "$spy" record --pid "$pid" --duration 40 --rate 40 --nonblocking --format raw -o "$dir/parent_busy.txt" >/dev/null 2>&1
  timeout 60 "$spy" record --pid "$pid" --duration 40 --rate 40 --nonblocking --gil --format raw -o "$dir/parent_gil.txt" >/dev/null 2>&1
  gzip -f "$dir"/parent_*.txt
}

# `verify`: the GPU checks still open after 2026-12-03, ~20 minutes in all, as three calls of at most 10 minutes
# (the lent machine's limit). `verify_a`: the driver's process lock, the exploit corpus, then the whole library in the
# pipelined engine (ADV_TIMEOUT=180 LIB_TIMEOUT=330 THROUGHPUT_ARGS='--time-box 280'); `verify_b`: the library
# again, longer (LIB_TIMEOUT=540 THROUGHPUT_ARGS='--time-box 480'); `verify_c`: the six torch_compile candidates
# that compile once per shape now, every workload, then the timer's fidelity and `solbench profile` over >= 20
# problems (COMPILE_TIMEOUT=150 FIDELITY_TIMEOUT=120 PROFILE_BOX=150 PROFILE_TIMEOUT=240).
# Carry `.whl/` (pydantic, Liger, py-spy, the service's wheels: scripts/fetch_serve_wheels.sh).
VERIFY_A="env locktest adversarial_gpu throughput"
VERIFY_B="env throughput"
VERIFY_C="env compile_check fidelity profile_throughput"
VERIFY_D="env lib_smallest fidelity_sets eager_resume"  # issue 29's records first: LIB_SMALL_TIMEOUT, EAGER_TIMEOUT
FINAL_A="env eager_lib adversarial_gpu serve"  # one call, ~9.5 min: LIB_TIMEOUT=220 ADV_TIMEOUT=200 SERVE_TIMEOUT=115 SERVE_WAIT=90
# The fifth session's last call (~8.5 min): the profile pairs, the library's pace after the parent's /proc scans,
# comparisons and memory admission changed, then the eager extremes resumed (decoder_layer's fix among them).
FINAL_B="env profile_throughput throughput eager_resume"  # PROFILE_BOX=140 PROFILE_TIMEOUT=175 LIB_TIMEOUT=160 THROUGHPUT_ARGS='--time-box 100' EAGER_TIMEOUT=170
# The next session's first call (~6 min): what the sixth session changed and could not re-run (qwen3
# qk_norm_rope's new eager at decode_b1, the top-k sampler's Triton kernel), the hard problems' kernels
# against their baselines again, then the library's pace (the timing windows are the next lever).
NEXT_A="env eager_resume sampling_check hard_baselines throughput"  # EAGER_TIMEOUT=90 HARD_TIMEOUT=150 LIB_TIMEOUT=200 THROUGHPUT_ARGS='--time-box 130'
# The seventh session's first call (~9 min): issue 29's last records (qk_norm_rope's eager, the sampler's Triton
# kernel), then the whole library with the shorter timing windows (harness.window says where each went).
CALL_A="env issue29 throughput"  # I29_TIMEOUT=90 LIB_TIMEOUT=400 THROUGHPUT_ARGS='--time-box 330' LOAD_WATCH_S=400 SPY_AFTER_S=120
# The seventh session's last call (~9 min): the driver's process lock on the GPU, the corpus after the window
# changes (the first burst's room made before it, other workers locked during it), then the library's pace.
CALL_C="env locktest adversarial_gpu throughput"  # ADV_TIMEOUT=200 LIB_TIMEOUT=300 THROUGHPUT_ARGS='--time-box 240'
# The eighth session's (~9.5 min a call): the driver's lock on several processes (in turn and at once) and
# which processes it refuses (lock_probe.py, in locktest), then the whole library with every awaited process
# lockable and lanes lending their slots while they wait for memory (LIB_TIMEOUT=520 THROUGHPUT_ARGS='--time-box
# 440'; add '--gate-batch 1 --gate-fair --gate-slice 0.03' for the unbatched gate).
PACE="env locktest throughput"
# The ninth session's last call (~7 min): the exploit corpus on the GPU with the warm-up of later shapes and the
# `prime` request (ADV_TIMEOUT=190), then the library's pace with the sharper memory reservations
# (LIB_TIMEOUT=220 THROUGHPUT_ARGS='--time-box 170').
CORPUS_PACE="env adversarial_gpu throughput"
STEPS=()
for s in "$@"; do
  case $s in
    verify) STEPS+=($VERIFY_A $VERIFY_B $VERIFY_C) ;;
    verify_a) STEPS+=($VERIFY_A) ;;
    verify_b) STEPS+=($VERIFY_B) ;;
    verify_c) STEPS+=($VERIFY_C) ;;
    verify_d) STEPS+=($VERIFY_D) ;;
    final_a) STEPS+=($FINAL_A) ;;
    final_b) STEPS+=($FINAL_B) ;;
    next_a) STEPS+=($NEXT_A) ;;
    call_a) STEPS+=($CALL_A) ;;
    call_c) STEPS+=($CALL_C) ;;
    pace) STEPS+=($PACE) ;;
    corpus_pace) STEPS+=($CORPUS_PACE) ;;
    *) STEPS+=("$s") ;;
  esac
done

for s in "${STEPS[@]}"; do
  case $s in
    evidence)
      # issue 27: the parent-clocked burst's precision (claimed median / parent's time per call, wall and NVML)
      # on 5 problems, honest shipped candidates, every workload (time-boxed)
      step evidence timeout ${EVIDENCE_TIMEOUT:-240} python3 benchmarks/burst_precision.py \
        --out "$RES/burst_precision_$STAMP.json" ;;
    eager_lib)
      # issues 29 and 27: every shipped torch_eager and library baseline at each problem's smallest and
      # largest workload (the burst on the device route included), time-boxed, records as they finish
      step eager_lib timeout ${LIB_TIMEOUT:-230} python3 scripts/run_library.py -o "$RES/eager_lib_$STAMP.jsonl" \
        --include 'torch_eager*' 'lib_*' --extremes --budget 0.2 --timeout 60 ${LIB_ARGS:-} ;;
    diag)
      # where a run hangs on the GPU: stacks of every Python process (py-spy) while two runs go
      step diag_baselines bash scripts/hang_probe.sh diag_baselines 75 30 60 -- python3 scripts/run_library.py \
        -o "$OUT/diag_baselines.jsonl" --include 'lib_*' --extremes --budget 0.2 --timeout 60
      step diag_library bash scripts/hang_probe.sh diag_library 75 35 65 -- python3 benchmarks/library_throughput.py \
        --only 'llama3_1_8b.*' --smallest-only --budget 0.2 --timeout 60 -o "$OUT/diag_library.json" --time-box 45 ;;
    profile_throughput)
      # issue 26: solbench profile per (problem, candidate), >= 20 problems, the next pair prepared meanwhile
      step profile_throughput timeout ${PROFILE_TIMEOUT:-240} python3 benchmarks/profile_throughput.py \
        -o $RES/profile_throughput.json --problems 26 --time-box ${PROFILE_BOX:-200} ;;
    serve)
      # issue 31: 20 submissions queued at once through `solbench submit --wait` (SQLite), wall and records/min
      step serve timeout ${SERVE_TIMEOUT:-200} python3 scripts/serve_throughput.py -o "$RES/serve_$STAMP.json" \
        -n 20 --device cuda --budget 0.2 --timeout ${SERVE_WAIT:-150} ;;
    pool_check)
      # the burst's room made by its untimed prepare: honest SDPA baselines whose burst outgrew the device
      # pool inside the parent's clock (REWARD_HACK at 21-68 ms a call on 2026-12-02, call 5)
      J=problems/flux1_dev/joint_attention/solutions
      step pool_check timeout ${POOL_TIMEOUT:-80} python3 -m solbench run flux1_dev.joint_attention -s $J/lib_torch_sdpa_flash.py \
        -s $J/lib_torch_sdpa_cudnn.py -s $J/torch_eager.py --workload 512px_b1 --budget 0.2 -q -o "$RES/pool_check_$STAMP.jsonl" ;;
    host_check)
      # issue 27: problem code in the sandboxed host on CUDA (a cost-hook problem) and its overhead per case
      step host_check timeout ${HOST_TIMEOUT:-120} python3 -m solbench run llama3_1_8b.paged_attention_decode \
        -s problems/llama3_1_8b/paged_attention_decode/solutions/torch_eager.py --budget 0.2 -q \
        -o "$RES/host_check_$STAMP.jsonl" ;;
    lib_smallest)
      # issue 29: every library baseline not yet PASSED in the day's file, at its problem's smallest workload
      step lib_smallest timeout ${LIB_SMALL_TIMEOUT:-230} python3 scripts/run_library.py -o "$RES/eager_lib_$STAMP.jsonl" \
        --include 'lib_*' --smallest --budget 0.2 --timeout 60 --resume ;;
    prefill_recheck)
      # the attention prefill candidates made contiguous for SDPA (the edge round "strided" on 2026-12-02, call 9)
      step prefill_recheck timeout ${PREFILL_TIMEOUT:-90} python3 scripts/run_library.py -o "$RES/eager_lib_$STAMP.jsonl" \
        --only 'llama3_1_8b.attention_prefill' 'qwen3_30b_a3b.attention_prefill' --include 'torch_eager*' 'lib_*' \
        --smallest --budget 0.2 --timeout 60 --resume ;;
    eager_resume)
      # issue 29: every shipped torch_eager at its problem's smallest and largest workload, not yet PASSED in the day's file
      # EAGER_FILE: resume another day's file (default: today's)
      step eager_resume timeout ${EAGER_TIMEOUT:-320} python3 scripts/run_library.py -o "${EAGER_FILE:-$RES/eager_lib_$STAMP.jsonl}" \
        --include 'torch_eager*' --extremes --budget 0.2 --timeout 60 --resume ;;
    baselines_resume)
      # issue 29: every shipped torch_eager and library baseline at each problem's smallest and largest
      # workload, appended to the day's file, skipping what it already holds
      step eager_lib timeout ${LIB_TIMEOUT:-500} python3 scripts/run_library.py -o "$RES/eager_lib_$STAMP.jsonl" \
        --include 'torch_eager*' 'lib_*' --extremes --budget 0.2 --timeout 60 --resume ;;
    locktest)
      # the driver's process lock (cuCheckpointProcessLock) on this GPU: a busy process locked, drained, unlocked
      step locktest timeout 60 python3 -m pytest -q -s -p no:cacheprovider -rs tests/engine/test_cudalock.py
      # which processes the driver refuses to lock (call 23: 333 refusals, code 801): after Kineto, CUDA IPC, VMM
      step lockprobe timeout 60 python3 scripts/lock_probe.py ;;
    compile_check)
      # the six shipped torch_compile candidates that recompiled for every input set (2026-12-03), every workload
      step compile_check timeout ${COMPILE_TIMEOUT:-150} python3 scripts/run_library.py -o "$RES/compile_check_$STAMP.jsonl" \
        --only gpt_oss_20b.moe_mxfp4_gemm qwen3_30b_a3b.moe_grouped_gemm llama3_1_8b.paged_attention_decode \
        deepseek_v3.mla_paged_decode llama3_1_8b.tree_verify_attention llama3_1_8b.varlen_prefill_attention \
        --include 'torch_compile*' --budget 0.2 --timeout 120 ;;
    issue29)
      # issue 29's last records: qwen3 qk_norm_rope's eager (rounded once) and the top-k sampler's Triton kernel (its
      # bound a constexpr now), every workload, eager and Triton, skipping what the day's file holds of these files
      step issue29 timeout ${I29_TIMEOUT:-90} python3 scripts/run_library.py -o "$RES/eager_lib_$STAMP.jsonl" \
        --only qwen3_30b_a3b.qk_norm_rope llama3_1_8b.top_k_top_p_sampling --include 'torch_eager*' 'triton_*' \
        --budget 0.2 --timeout 60 --resume ;;
    sampling_check)
      # issue 29: top_k_top_p_sampling's eager and Triton kernel at every workload, its logits no longer tiny
      step sampling_check timeout ${SAMPLING_TIMEOUT:-90} python3 scripts/run_library.py -o "$RES/eager_lib_$STAMP.jsonl" \
        --only llama3_1_8b.top_k_top_p_sampling --include 'torch_eager*' 'triton_*' --budget 0.2 --timeout 60 ;;
    hard_baselines)
      # issue 29: the hard problems' SOL targets against their library baselines: every workload, the
      # shipped Triton kernel and each baseline (flex_attention paged/sliding decode, grouped_mm, fla) side by side
      step hard_baselines timeout ${HARD_TIMEOUT:-240} python3 scripts/run_library.py -o "$RES/hard_baselines_$STAMP.jsonl" \
        --only llama3_1_8b.paged_attention_decode llama3_1_8b.varlen_prefill_attention qwen3_30b_a3b.moe_grouped_gemm \
        deepseek_v3.mla_paged_decode mistral_7b.attention_decode_sliding_window qwen3_next_80b_a3b.gated_delta_rule_decode \
        --include 'lib_*' 'triton_*' --budget 0.2 --timeout 120 ;;
    baselines)
      # issue 29: every library baseline (lib_*.py: PyTorch's SDPA backends, flex_attention, _grouped_mm,
      # _scaled_mm; Liger where carried) at each problem's smallest and largest workload
      step baselines timeout ${BASELINES_TIMEOUT:-150} python3 scripts/run_library.py -o "$RES/baselines_$STAMP.jsonl" \
        --include 'lib_*' --extremes --budget 0.2 --timeout 60 ;;
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
        --workload decode_b16 --workload prefill_b4_s2048 --workload prefill_b2_s8192 -o "$RES/show_$STAMP.jsonl"
      step show_rmsnorm timeout ${SHOW_TIMEOUT:-200} python3 -m solbench run llama3_1_8b.rmsnorm \
        -s $P/rmsnorm/solutions/torch_eager.py -s $P/rmsnorm/solutions/triton_rmsnorm.py -s tests/candidates/gpu_cupy_rmsnorm.py \
        -o "$RES/show_$STAMP.jsonl" ;;
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
        python3 -m pytest -q -p no:cacheprovider -rA -m "slow or not slow" tests/adversarial ${ADV_K:+-k "$ADV_K"}
      cp "$OUT/adversarial_gpu.log" "$RES/adversarial_gpu_$STAMP.log" ;;
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
      step timing_probe timeout ${PROBE_TIMEOUT:-150} python3 benchmarks/timing_cost_probe.py --out "$RES/timing_cost_probe_$STAMP.txt"
      step parent_profile timeout ${PROBE_TIMEOUT:-150} python3 -m cProfile -o "$OUT/parent.prof" -m solbench run llama3_1_8b.rmsnorm \
        -s problems/llama3_1_8b/rmsnorm/solutions/torch_eager.py --workload decode_b1 --workload decode_b16 --workload prefill_b1_s2048 -o "$OUT/parent_probe.jsonl"
      python3 -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats(\"cumulative\").print_stats(45)" "$OUT/parent.prof" > "$RES/parent_profile_$STAMP.txt" 2>&1
      python3 -c "import json,sys; [print(r[\"workload\"], r[\"status\"], json.dumps(r.get(\"harness\"))) for r in map(json.loads, open(sys.argv[1]))]" "$OUT/parent_probe.jsonl" | tee -a "$RES/parent_profile_$STAMP.txt" ;;
    landlock_probe)
      step landlock_probe timeout 200 python3 scripts/landlock_cuda_probe.py ;;
    run_seed)
      step run_seed sb run llama3_1_8b.attn_o_proj_residual llama3_1_8b.rmsnorm -o "$RES/seed_$STAMP.jsonl" ;;
    run_library)
      # eager + Triton for every problem, time-boxed (records are written as they finish)
      step run_library timeout ${LIB_TIMEOUT:-420} python3 scripts/run_library.py -o "$RES/library_$STAMP.jsonl" --include 'torch_eager*' 'triton_*' --first 'llama3_1_8b.*' --timeout 60 ${LIB_ARGS:-} ;;
    run_compile)
      step run_compile timeout ${COMPILE_TIMEOUT:-240} python3 scripts/run_library.py -o "$RES/library_$STAMP.jsonl" --include 'torch_compile*' --only 'llama3_1_8b.*' ;;
    calibrate)
      mkdir -p hardware_specs/measured
      step calibrate sb calibrate -o hardware_specs/measured/h200_sxm_measured.yaml ;;
    fidelity)
      # the adaptive timer against the former settings, case by case (medians and device time per timing)
      step fidelity timeout ${FIDELITY_TIMEOUT:-120} python3 benchmarks/timing_fidelity.py --compare --repeats 3 \
        ${FIDELITY_ARGS:-} --out "$RES/timing_adaptive_$STAMP.json" ;;
    fidelity_sets)
      # the engine's set count: graph mode's rotating sets (up to 256) against a flushed timing's few (4),
      # the add cases, today's timer, alternately (medians within 1%: the change of 2026-12-02)
      step fidelity_sets timeout ${FIDELITY_TIMEOUT:-120} python3 benchmarks/timing_fidelity.py --compare --sets --repeats 3 \
        --out "$RES/timing_sets_$STAMP.json" ;;
    overhead)
      # the all-stream CUPTI timer against events only, same problems and candidates, back to back
      step overhead_all timeout ${OVERHEAD_TIMEOUT:-150} python3 benchmarks/harness_overhead.py ${OVERHEAD_ARGS:-} -o "$RES/harness_overhead_all_streams_$STAMP.json"
      step overhead_events timeout ${OVERHEAD_TIMEOUT:-150} python3 benchmarks/harness_overhead.py ${OVERHEAD_ARGS:-} --events-only -o "$RES/harness_overhead_events_only_$STAMP.json" ;;
    library_check)
      # every shipped eager and Triton candidate at each problem's smallest and largest workload:
      # false positives of the guards and the timer (time-boxed; records are written as they finish)
      step library_check timeout ${LIB_TIMEOUT:-300} python3 scripts/run_library.py -o "$RES/library_check_$STAMP.jsonl" --include 'torch_eager*' 'triton_*' --extremes --budget 0.3 ${LIB_ARGS:-} ;;
    adversarial)
      step adversarial python3 -m pytest -q -p no:cacheprovider tests/adversarial -m gpu ;;
    model_llama)
      # issue 22: every Llama-3.1-8B layer op and the whole-layer problem at decode b1 and b64 (context
      # 8192) and prefill 8192 tokens, eager + the best shipped Triton kernels (~45 records, < 4 min);
      # MODEL_ARGS=--resume on a second call finishes what a time-out left
      step model_llama timeout ${MODEL_TIMEOUT:-230} python3 scripts/run_model.py llama3_1_8b \
        -o "$RES/model_llama3_1_8b_$STAMP.jsonl" --budget 0.2 --timeout 60 \
        --scenario decode:1:8192 decode:64:8192 prefill:8192 \
        --include torch_eager.py 'triton_tma_*' triton_rmsnorm.py triton_rope.py triton_kv_cache_append.py ${MODEL_ARGS:-}
      for phase in "--tokens 1" "--tokens 64" "--phase prefill"; do
        python3 -m solbench model llama3_1_8b "$RES/model_llama3_1_8b_$STAMP.jsonl" $phase | tee -a "$OUT/model_llama.log"
      done ;;
    liger)
      # Liger-Kernel baselines (carried wheel: .whl/liger_kernel-*.whl) against the Llama problems, largest
      # workload of each; then the .cu candidates (build once per content, nvcc's first error line) and
      # published FlashInfer-Trace / KernelBench imports scored on the H200 (about 2 minutes in all)
      # (the six problems with a Liger wrapper: rmsnorm, fused_add_rmsnorm, rope, swiglu, gate_up_swiglu,
      # cross_entropy; ours alongside; a missing wheel prints one 'skipped:' line per wrapper)
      step liger_all timeout ${LIGER_TIMEOUT:-100} python3 scripts/run_library.py -o "$RES/liger_$STAMP.jsonl" \
        --include 'lib_*' 'triton_*' --only 'llama3_1_8b.rmsnorm' 'llama3_1_8b.fused_add_rmsnorm' 'llama3_1_8b.rope' \
        'llama3_1_8b.swiglu' 'llama3_1_8b.gate_up_swiglu' 'llama3_1_8b.cross_entropy' --largest --timeout 60
      step cu_candidates timeout 120 python3 -m solbench run tests/fixtures/tiny/scaled_add --workload n131072 \
        -s tests/candidates/gpu_scaled_add.cu -s tests/candidates/gpu_broken.cu -s tests/candidates/setup_honest.py \
        -o "$RES/interop_$STAMP.jsonl" -q
      step interop_import bash -c 'F=tests/fixtures/interop; set -e;
        python3 -m solbench import flashinfer-trace $F/flashinfer_trace/rmsnorm_h4096.json --workloads $F/flashinfer_trace/rmsnorm_h2048.jsonl -o /tmp/fi_rms;
        python3 -m solbench import kernelbench $F/kernelbench/level2/12_Gemm_Multiply_LeakyReLU.py -o /tmp/kb12;
        timeout 60 python3 -m solbench run /tmp/fi_rms -s /tmp/fi_rms/reference.py -q -o "$RES/interop_$STAMP.jsonl" || true;
        timeout 60 python3 -m solbench run /tmp/kb12 -s /tmp/kb12/reference.py -q -o "$RES/interop_$STAMP.jsonl" || true;
        python3 -m solbench sol /tmp/fi_rms --gpu h200_sxm --json; python3 -m solbench sol /tmp/kb12 --gpu h200_sxm --json' ;;
    compare)
      # issue 18 and 16's launch floor: two candidates of a decode rmsnorm (T_ideal far under the floor)
      # interleaved 3 rounds, compared with significance; records carry t_floor_s; the history of
      # every committed H200 record with its trend chart (needs scipy: carried in .whl/)
      P=problems/llama3_1_8b/rmsnorm/solutions
      F="$RES/compare_$STAMP.jsonl"
      step compare_run timeout ${COMPARE_TIMEOUT:-180} python3 -m solbench run llama3_1_8b.rmsnorm \
        -s $P/torch_eager.py -s $P/triton_rmsnorm.py --workload decode_b1 --workload prefill_b1_s2048 \
        --interleave 3 --cooldown 2 --budget 0.3 -q -o "$F"
      step compare_stats bash -c "python3 -m solbench compare torch_eager triton_rmsnorm --by candidate --results $F --json > $RES/compare_$STAMP.json; cat $RES/compare_$STAMP.json | head -60;
        python3 -m solbench leaderboard $F; python3 -m solbench history $RES --candidate 'triton_*' --min-runs 2 -f markdown -o $RES/history_$STAMP.png > $RES/history_$STAMP.md; tail -30 $RES/history_$STAMP.md" ;;
    throughput)
      # issue 15: the whole library, all workloads, torch_eager + one more candidate (Triton, else
      # torch.compile), one executor per GPU; the summary is rewritten after every record, so the time
      # box keeps what finished (~9 min)
      stall_watch throughput "$RES/library_throughput_$STAMP.jsonl" & WATCH=$!
      load_watch & LOADW=$!
      step throughput timeout ${LIB_TIMEOUT:-540} python3 benchmarks/library_throughput.py --budget 0.5 --timeout 60 \
        -o $RES/library_throughput.json --records "$RES/library_throughput_$STAMP.jsonl" \
        --intervals "$RES/diag_$STAMP/gate_intervals.json" ${THROUGHPUT_ARGS:---time-box 420}
      rc=$?  # a run that failed to start leaves an earlier summary: not copied under today's name (124: cut off, kept)
      kill $WATCH $LOADW 2>/dev/null; pkill -f "nvidia-smi dmon" 2>/dev/null; pkill -x top 2>/dev/null
      { [ $rc -eq 0 ] || [ $rc -eq 124 ]; } && cp $RES/library_throughput.json "$RES/library_throughput_$STAMP.json" ;;
    knobs)
      # issue 26: the library pass under each of KNOB_SETS (';'-separated argument strings, e.g.
      # '--in-flight 12 --memory-share 0.85;--in-flight 16 --memory-share 0.85'), KNOB_BOX seconds each from the
      # library's start, to compare the engine's settings on the same problems: $RES/knobs_$STAMP/pass{i}.json
      IFS=';' read -ra sets <<< "${KNOB_SETS:?KNOB_SETS names the settings to compare}"
      i=0
      for args in "${sets[@]}"; do
        i=$((i + 1))
        step knobs_$i timeout ${KNOB_TIMEOUT:-250} python3 benchmarks/library_throughput.py --budget 0.5 --timeout 60 \
          -o "$RES/knobs_$STAMP/pass$i.json" --records "$RES/knobs_$STAMP/pass$i.jsonl" \
          --intervals "$RES/knobs_$STAMP/gate_intervals_pass$i.json" --time-box ${KNOB_BOX:-180} $args
      done ;;
    ray_local)
      # issue 15: the same subset (Llama-3.1-8B, smallest workloads, torch_eager) on local executors and
      # through a local Ray instance (carried wheel: .whl/ray-*.whl, slimmed), for the "within 5%" check (~2.5 min)
      export RAY_USAGE_STATS_ENABLED=0
      for mode in local ray; do
        step ray_$mode timeout ${RAY_TIMEOUT:-80} python3 benchmarks/library_throughput.py --only 'llama3_1_8b.*' \
          --smallest-only --second none --budget 0.3 $([ $mode = ray ] && echo --cluster ray) \
          -o "$RES/ray_compare_${mode}_$STAMP.json" --records "$RES/ray_compare_${mode}_$STAMP.jsonl"
      done
      python3 -c "import json,sys; a,b=(json.load(open(f'$RES/ray_compare_{m}_$STAMP.json')) for m in ('local','ray'));
print('ray_compare', {m: (d['records'], d['wall_s'], d['setup_s'], d['steady_records_per_min']) for m,d in (('local',a),('ray',b))},
  'ray/local steady rate', round(b['steady_records_per_min']/a['steady_records_per_min'],3))" \
        | tee -a "$OUT/ray_local.log" ;;
    report)
      step report bash -c "python3 -m solbench report $RES -o $RES/report.html && python3 -m solbench plot roofline $RES -o $RES/roofline.png --gpu h200_sxm" ;;
    profile_library)
      # issue 17, ~4 min of device time in all. The Llama-3.1-8B problems' largest workloads, eager and
      # Triton candidates, under Nsight Compute. A probe (rmsnorm, <= 75 s, kept in the results) finds
      # the worker setting under which ncu attaches: guarded; else as root; else without the guards.
      # Then ONE `solbench profile` over the rest (one Python start; each record is appended as it
      # finishes, so the time box keeps what finished), cheap problems first so that >= 10 finish.
      # Knobs: PROFILE_TIMEOUT (main pass, s), PROFILE_ORDER (problem folders under llama3_1_8b),
      # PROFILE_MORE (more problem folders, appended).
      PF="$RES/profile_$STAMP.jsonl"
      L=problems/llama3_1_8b
      ONLY="--only torch_eager --only triton_*"
      PARGS=""
      profiled() { grep -Eq "^[1-9][0-9]* of [0-9]+ profiled" "$OUT/$1.log" 2>/dev/null; }
      set -f  # triton_* reaches solbench as a pattern, not a file glob
      step profile_probe timeout 75 python3 -m solbench profile $L/rmsnorm $ONLY --budget 0.1 -q -o "$PF"
      profiled profile_probe || { PARGS="--worker-user root"; step profile_probe_root timeout 45 python3 -m solbench profile $L/rmsnorm --only torch_eager --budget 0.1 -q -o "$PF" $PARGS; }
      profiled profile_probe || profiled profile_probe_root || { PARGS="--worker-user root --no-guards"; step profile_probe_noguards timeout 45 python3 -m solbench profile $L/rmsnorm --only torch_eager --budget 0.1 -q -o "$PF" $PARGS; }
      echo "=== profile_library: worker setting '${PARGS:-guarded}'"
      ORDER=${PROFILE_ORDER:-"swiglu rope fused_add_rmsnorm embedding kv_cache_append cross_entropy qkv_proj attn_o_proj_residual mlp_down_proj_residual gate_up_swiglu lm_head attention_decode paged_attention_decode attention_prefill varlen_prefill_attention rmsnorm_backward linear_backward decoder_layer"}
      DIRS=$(for p in $ORDER; do echo "$L/$p"; done)
      step profile_library timeout -k 15 ${PROFILE_TIMEOUT:-165} python3 -m solbench profile $DIRS ${PROFILE_MORE:-} $ONLY --budget 0.1 -q -o "$PF" $PARGS
      set +f
      step profile_measured bash -c "python3 -m solbench validate --measured $PF --all --format markdown > $RES/measured_$STAMP.md; \
        python3 -m solbench validate --measured $PF --all; \
        python3 -m solbench plot roofline $PF --levels -o $RES/roofline_levels_$STAMP.png; \
        du -sh $RES/profile_$STAMP.ncu" ;;
    new_problems)
      # issue 16: the six data-dependent problems (cost hooks: paged GQA and MLA decode, varlen prefill, MoE
      # grouped GEMM, top-k/top-p sampling, tree verify attention), eager + Triton, every workload (~58
      # records, < 4 min); their Triton kernels compiled against the references first (~60 s). One run per
      # problem, so the time box keeps what finished.
      step new_problems_kernels timeout ${NEW_TESTS_TIMEOUT:-100} python3 -m pytest -q -p no:cacheprovider -x \
        tests/library/test_data_dependent_problems.py tests/library/test_sampling_tree_problems.py
      END=$((SECONDS + ${NEW_TIMEOUT:-210}))
      for P in llama3_1_8b/paged_attention_decode deepseek_v3/mla_paged_decode llama3_1_8b/varlen_prefill_attention \
               qwen3_30b_a3b/moe_grouped_gemm llama3_1_8b/top_k_top_p_sampling llama3_1_8b/tree_verify_attention; do
        LEFT=$((END - SECONDS)); [ $LEFT -gt 10 ] || break
        step "new_${P//\//_}" timeout $LEFT python3 -m solbench run problems/$P -s problems/$P/solutions/torch_eager.py \
          $(ls problems/$P/solutions/triton_*.py | sed 's/^/-s /') --budget 0.2 --timeout 60 -q \
          -o "$RES/new_problems_$STAMP.jsonl"
      done ;;
    jit_cache)
      # --jit-cache: a torch.compile candidate's first record cold, then warm (fresh workers each time)
      step jit_cache timeout ${JIT_TIMEOUT:-200} python3 benchmarks/jit_cache.py --problem llama3_1_8b.rmsnorm \
        --workload prefill_b1_s2048 -o "$RES/jit_cache_$STAMP.json" ;;
    transport)
      # issue 15: the CUDA VMM pool (export/import across processes, a worker as nobody, mutation seen by
      # the parent), then the same problems by memfd and by the device route, harness timings per record
      step transport_tests timeout ${TRANSPORT_TESTS_TIMEOUT:-90} python3 -m pytest -q -p no:cacheprovider -rs tests/worker/test_devshare.py
      step transport_compare timeout ${TRANSPORT_TIMEOUT:-150} python3 benchmarks/transport_compare.py \
        -o "$RES/transport_compare_$STAMP.json" ;;
    *)
      echo "unknown step $s" ;;
  esac
done
tar czf "$OUT/results.tgz" results hardware_specs/measured 2>/dev/null || tar czf "$OUT/results.tgz" results
ls -la "$OUT"
