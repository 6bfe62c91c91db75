#!/usr/bin/env bash
# Streamed parameters page-locked in place and copied under the MSMs.
# h2d bandwidth (pageable / pinned lease / registered in place); GPU tests;
# porep:24 one 10-partition job: unlimited, 16 GiB limit pinned and
# pageable, streamed without a limit.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
timeout 60 $B/h2d_bench "$REV" "h2d_bench --mib 1024 --runs 5 (.device/p/job7.sh)" > $R/h2d.json 2> $R/h2d.log
echo "h2d rc $?"; cat $R/h2d.log
for t in gpu_prover pinned_pool_test gpu_engine; do
    timeout 150 $B/$t > $R/test-$t.log 2>&1; echo "test $t rc $?" | tee -a $R/tests.txt
    grep -E "test result|FAILED|panicked" $R/test-$t.log | head -5
done
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 $* --out DIR --json REV CMD (.device/p/job7.sh, CUZK_REQUIRE_GPU=1)"
    timeout 120 $B/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 "$@" \
        --out "$R/$name" --json "$REV" "$cmd" > "$R/$name.json" 2> "$R/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy|needs|rror|streamed h2d|kernel_region" "$R/$name.log" | head -6
}
run porep24-jobs1
run porep24-limit16g --engine device_memory_limit=16GiB
run porep24-limit16g-pageable --engine device_memory_limit=16GiB --engine gpu_pin_streamed=false
run porep24-streamed --engine gpu_params=streamed
run porep24-limit32g --engine device_memory_limit=32GiB
cd $OUT && tar czf r.tgz r && rm -rf r
