#!/usr/bin/env bash
# porep:K's parts in place, each a task of its own; MSM scratch sized for the
# (limited) card. porep:24 one 10-partition job: default, synthesis 2, 4 jobs;
# device_memory_limit 32 GiB and 16 GiB. GPU tests first.
set -u
export CUZK_REQUIRE_GPU=1
REV=$(cat .device/p/rev); B=.device/p
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
for t in gpu_memory_limit gpu_prover gpu_engine; do
    timeout 150 $B/$t > $R/test-$t.log 2>&1; echo "test $t rc $?" | tee -a $R/tests.txt
    grep -E "test result|FAILED|panicked" $R/test-$t.log | head -5
done
run() {
    local name=$1; shift
    local cmd="engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params $* --out DIR --json REV CMD (.device/p/job5.sh, CUZK_REQUIRE_GPU=1)"
    timeout 120 $B/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params "$@" \
        --out "$R/$name" --json "$REV" "$cmd" > "$R/$name.json" 2> "$R/$name.log"
    echo "$name rc $?"; grep -E "per partition|busy|needs|rror" "$R/$name.log" | head -4
}
run porep24-jobs1 --jobs 1
run porep24-jobs1-synthesis2 --jobs 1 --engine synthesis_concurrency=2
run porep24-jobs4 --jobs 4
run porep24-jobs1-limit32g --jobs 1 --engine device_memory_limit=32GiB
run porep24-jobs1-limit16g --jobs 1 --engine device_memory_limit=16GiB
cd $OUT && tar czf r.tgz r && rm -rf r
