#!/usr/bin/env bash
# GPU tests of the device memory limit and eviction, then porep:24 through
# the engine: one 10-partition job (porep:K now in parallel parts), and under
# device_memory_limit 32 GiB, 16 GiB and 6 GiB.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
T0=$(date +%s)
log() { echo "$1 $(date +%T) +$(( $(date +%s) - T0 ))s" | tee -a "$OUT/job.log"; }
log "start rev $REV nproc $(nproc) $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader)"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$OUT/smi.csv" &
SMI=$!
for t in gpu_memory_limit gpu_evict gpu_prover; do
    timeout 150 $B/$t > "$OUT/test-$t.log" 2>&1
    log "test $t rc $? $(grep 'test result' "$OUT/test-$t.log")"
    grep -E "FAILED|panicked|failed" "$OUT/test-$t.log" | head -5
done
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --jobs 1 --workers 2 --fake-params $* --out DIR --json REV CMD (.device/p/job.sh, CUZK_REQUIRE_GPU=1)"
    timeout 120 /usr/bin/time -v $B/engine_bench --circuit porep:24 --partitions 10 --jobs 1 --workers 2 --fake-params "$@" \
        --out "$OUT/$name" --json "$REV" "$cmd" > "$OUT/$name.json" 2> "$OUT/$name.log"
    log "$name rc $?"
    grep -E "seconds per partition|gpu_busy|Maximum resident|Error|error|placement|stream" "$OUT/$name.log" | head -8
}
run porep24-jobs1
run porep24-limit32g --engine device_memory_limit=32GiB
run porep24-limit16g --engine device_memory_limit=16GiB
run porep24-limit6g --engine device_memory_limit=6GiB
kill $SMI
log end
