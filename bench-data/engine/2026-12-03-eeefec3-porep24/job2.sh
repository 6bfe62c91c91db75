#!/usr/bin/env bash
# porep:24, one 10-partition job, synthesis_concurrency 2, 4 and auto (16);
# gpu_evict's failure message.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
timeout 60 $B/gpu_evict 2>&1 | grep -v "^\s*[0-9]*: \|^\s*at " | tail -25
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --jobs 1 --workers 2 --fake-params $* --out DIR --json REV CMD (.device/p/job2.sh, CUZK_REQUIRE_GPU=1)"
    timeout 100 $B/engine_bench --circuit porep:24 --partitions 10 --jobs 1 --workers 2 --fake-params "$@" \
        --out "$OUT/$name" --json "$REV" "$cmd" > "$OUT/$name.json" 2> "$OUT/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy" "$OUT/$name.log" | head -3
}
run porep24-jobs1-synthesis2 --engine synthesis_concurrency=2
run porep24-jobs1-synthesis4 --engine synthesis_concurrency=4
run porep24-jobs1-synthesis16 --engine synthesis_concurrency=16
