#!/usr/bin/env bash
# porep:K's parts through the global gate: porep:24, one 10-partition job,
# default config and synthesis_concurrency 2; gpu_evict on a 2^21 set.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
timeout 90 $B/gpu_evict 2>&1 | grep -v "^\s*[0-9]*: \|^\s*at " | tail -8
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --jobs 1 --workers 2 --fake-params $* --out DIR --json REV CMD (.device/p/job3.sh, CUZK_REQUIRE_GPU=1)"
    timeout 100 $B/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 "$@" \
        --out "$OUT/$name" --json "$REV" "$cmd" > "$OUT/$name.json" 2> "$OUT/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy" "$OUT/$name.log" | head -3
}
run porep24-jobs1-gate
run porep24-jobs1-gate-synthesis2 --engine synthesis_concurrency=2
run porep24-jobs4-gate --jobs 4
