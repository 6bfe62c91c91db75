#!/usr/bin/env bash
# Streamed MSMs as one pipeline (every copy one chunk ahead, H's first under
# the NTTs; chunk densities planned once per shape). gpu_prover; porep:24 one
# 10-partition job: unlimited, 16 GiB, streamed without a limit.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
R=$OUT/r; mkdir -p $R
timeout 150 $B/gpu_prover > $R/test-gpu_prover.log 2>&1; echo "test gpu_prover rc $?"
grep -E "test result|FAILED|panicked" $R/test-gpu_prover.log | head -5
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 $* --out DIR --json REV CMD (.device/p/job9.sh, CUZK_REQUIRE_GPU=1)"
    timeout 120 $B/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 "$@" \
        --out "$R/$name" --json "$REV" "$cmd" > "$R/$name.json" 2> "$R/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy|needs|rror|streamed h2d|kernel_region" "$R/$name.log" | head -6
}
run porep24-jobs1
run porep24-limit16g --engine device_memory_limit=16GiB
run porep24-streamed --engine gpu_params=streamed
cd $OUT && tar czf r.tgz r && rm -rf r
