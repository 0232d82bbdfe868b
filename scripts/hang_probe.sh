#!/usr/bin/env bash
# A run that may hang, with every Python process's stacks (py-spy, carried in .whl/) and the process
# tree dumped while it runs: `bash scripts/hang_probe.sh NAME SECONDS DUMP_AT... -- COMMAND...`.
# Writes $OUT/NAME.stacks.txt and the command's output to $OUT/NAME.out.
set -u
name=$1; limit=$2; shift 2
dumps=()
while [ "$1" != "--" ]; do dumps+=("$1"); shift; done
shift
SPY=$(command -v py-spy || echo /tmp/site/bin/py-spy)
timeout -k 5 "$limit" "$@" > "$OUT/$name.out" 2>&1 &
pid=$!
t0=$SECONDS
for at in "${dumps[@]}"; do
  while [ $((SECONDS - t0)) -lt "$at" ] && kill -0 $pid 2>/dev/null; do sleep 1; done
  kill -0 $pid 2>/dev/null || break
  {
    echo "##### $name at $((SECONDS - t0)) s"
    ps -N --ppid 2 -o pid,ppid,user,stat,wchan:28,etimes,pcpu,rss,args --forest | grep -v " ps -N" | cut -c1-260
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1
    for p in $(pgrep -f python3); do
      echo "----- pid $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-200)"
      timeout 20 "$SPY" dump --native --pid "$p" 2>&1 | head -120
    done
  } >> "$OUT/$name.stacks.txt" 2>&1
done
wait $pid
echo "=== $name: rc=$? in $((SECONDS - t0)) s"
tail -30 "$OUT/$name.out"
