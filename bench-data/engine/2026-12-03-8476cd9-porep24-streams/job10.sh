#!/usr/bin/env bash
# A stream per worker against one shared stream; streamed pipeline. GPU tests;
# porep:24 one 10-partition job, 2 workers: unlimited / 16 GiB / 32 GiB, own
# streams (default) and shared (gpu_stream_per_worker=false).
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
cd $B && gunzip -f *.gz && chmod +x engine_bench gpu_* && cd - >/dev/null
R=$OUT/r; mkdir -p $R
for t in gpu_prover gpu_runtime gpu_evict gpu_memory_limit gpu_engine; do
  timeout 200 $B/$t > $R/test-$t.log 2>&1; echo "test $t rc $?"
  grep -E "test result|FAILED|panicked" $R/test-$t.log | head -5
done
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 $* --out DIR --json REV CMD (.device/p/job10.sh, CUZK_REQUIRE_GPU=1)"
    timeout 120 $B/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 "$@" \
        --out "$R/$name" --json "$REV" "$cmd" > "$R/$name.json" 2> "$R/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy|prep |needs|rror|streamed h2d|kernel_region|  h2d" "$R/$name.log" | head -7
}
run porep24-own
run porep24-shared --engine gpu_stream_per_worker=false
run porep24-limit16g-own --engine device_memory_limit=16GiB
run porep24-limit16g-shared --engine device_memory_limit=16GiB --engine gpu_stream_per_worker=false
run porep24-limit32g-own --engine device_memory_limit=32GiB
cd $OUT && tar czf r.tgz r && rm -rf r
