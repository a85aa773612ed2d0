#!/usr/bin/env bash
# Runs a command inside a fresh memory cgroup (v1 or v2) with a limit, after dropping the page
# cache, so two engines meet the same limit with their page cache counted (llama.cpp's mmap
# included); prints the cgroup's peak usage to stderr when the command ends. Needs root.
#   bench/paging/in_cgroup.sh 6G COMMAND [ARGS...]
# docs/paging.md has the rows measured with it.
set -euo pipefail
limit="$1"
shift
case "$limit" in
  *G) bytes=$(( ${limit%G} * 1024 * 1024 * 1024 )) ;;
  *M) bytes=$(( ${limit%M} * 1024 * 1024 )) ;;
  *) bytes="$limit" ;;
esac
name="jitllm-bench-$$"
own=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
if [ -n "$own" ] && [ -d /sys/fs/cgroup/memory ]; then  # v1
  cg="/sys/fs/cgroup/memory${own%/}/$name"
  mkdir "$cg"
  echo "$bytes" > "$cg/memory.limit_in_bytes"
  peak_file="$cg/memory.max_usage_in_bytes"
else  # v2
  own=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
  cg="/sys/fs/cgroup${own%/}/$name"
  mkdir "$cg"
  echo "$bytes" > "$cg/memory.max"
  peak_file="$cg/memory.peak"
fi
sync
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "in_cgroup: could not drop the page cache" >&2
status=0
sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" "$@" || status=$?
peak=$(cat "$peak_file" 2>/dev/null || echo 0)
echo "in_cgroup: limit $limit, peak usage $(awk -v b="$peak" 'BEGIN {printf "%.2f GiB", b / 1073741824}'), exit $status" >&2
rmdir "$cg" 2>/dev/null || true
exit $status
