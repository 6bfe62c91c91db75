#!/usr/bin/env bash
# Held device memory (resident parameters, PCEs) reserved in gpu-sched and
# given back under pressure; release_idle. GPU tests; porep:24 one
# 10-partition job, 2 workers: unlimited and 16 GiB.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
cd $B && gunzip -f *.gz && chmod +x engine_bench gpu_* h2d_bench && cd - >/dev/null
R=$OUT/r; mkdir -p $R
timeout 60 $B/h2d_bench "$REV" "h2d_bench --mib 1024 --runs 5 (.device/p/job11.sh)" > $R/h2d.json 2> $R/h2d.log
echo "h2d rc $?"; grep -E '"median"|"name"' $R/h2d.json | paste - - | head -4
for t in gpu_evict gpu_engine gpu_memory_limit gpu_prover; do
  timeout 200 $B/$t > $R/test-$t.log 2>&1; echo "test $t rc $?"
  grep -E "test result|FAILED|panicked" $R/test-$t.log | head -5
done
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 $* --out DIR --json REV CMD (.device/p/job11.sh, CUZK_REQUIRE_GPU=1)"
    RUST_LOG=info timeout 120 $B/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 "$@" \
        --out "$R/$name" --json "$REV" "$cmd" > "$R/$name.json" 2> "$R/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy|prep |needs|rror|in the way|kernel_region|streamed h2d" "$R/$name.log" | head -7
}
run porep24-jobs1
run porep24-limit16g --engine device_memory_limit=16GiB
cd $OUT && tar czf r.tgz r && rm -rf r
