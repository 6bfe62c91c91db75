#!/usr/bin/env bash
# 32 GiB PoRep C2 (10 partitions of 130 M constraints) through the engine,
# 2 workers, fake parameters: device memory unlimited, 16 GiB and 32 GiB
# (host staging; streamed queries chunked by bases, scalars read in place,
# carried windows no wider than a chunk's: 2^23 chunks on 16 GiB), with a
# working-set charge taking over the idle a/b/c buffers a finished proof
# left in the pinned pool. `start`: c2_bench in the
# background (setsid), then h2d_bench and the GPU tests (done before its
# first proof); `wait`: until c2_bench is done; `small`: porep:24 with the
# same three limits. Two proofs one after the other (--jobs 2): the second
# runs with the page-locked pools and parameters of the first.
set -u
export CUZK_REQUIRE_GPU=1
B=.device/p; REV=$(cat $B/rev)
W=/tmp/job19; R=$W/r; mkdir -p $R
case "$1" in
start)
    cd $B && gunzip -f *.gz && chmod +x c2_bench engine_bench gpu_* h2d_bench && cd - >/dev/null
    cp -r $B $W/bin
    setsid nohup nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader,nounits -lms 1000 > $R/nvidia-smi.csv 2>/dev/null &
    cmd="c2_bench --seal-proof StackedDrg32GiBV1_1 --jobs 2 --seed 1 --fake-params --pce-dir DIR --variant none --variant limit16g:device_memory_limit=16GiB --variant limit32g:device_memory_limit=32GiB --out DIR --json REV CMD (.device/p/job19.sh, CUZK_REQUIRE_GPU=1)"
    ( cd $W && RUST_LOG=info setsid nohup /usr/bin/time -v $W/bin/c2_bench --seal-proof StackedDrg32GiBV1_1 --jobs 2 --seed 1 --fake-params --pce-dir /tmp/pce \
        --variant none --variant limit16g:device_memory_limit=16GiB --variant limit32g:device_memory_limit=32GiB \
        --out $R/porep32g --json "$REV" "$cmd" > $R/porep32g.json 2> $R/porep32g.log; echo $? > $R/porep32g.rc ) &
    timeout 30 $W/bin/h2d_bench "$REV" "h2d_bench --mib 1024 --runs 5 (.device/p/job19.sh)" > $R/h2d.json 2> $R/h2d.log
    echo "h2d rc $?"; grep -E '"median"|"name"' $R/h2d.json | paste - - | head -4
    for t in gpu_pool gpu_engine; do timeout 200 $W/bin/$t > $R/$t.log 2>&1; echo "$t rc $?"; grep -E "test result|FAILED|panicked" $R/$t.log | head -3; done
    # The GPU tests finish under c2_bench's PCE recording and parameter
    # generation (CPU only, about 220 s), before its first proof.
    ;;
wait)
    while [ ! -f $R/porep32g.rc ] && [ $SECONDS -lt ${2:-560} ]; do sleep 5; done
    echo "c2_bench rc $(cat $R/porep32g.rc 2>/dev/null || echo running) at ${SECONDS}s"
    ;;
small)
    run() {
        local name=$1; shift
        local cmd="engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 $* --out DIR --json REV CMD (.device/p/job19.sh, CUZK_REQUIRE_GPU=1)"
        RUST_LOG=info timeout 120 $W/bin/engine_bench --circuit porep:24 --partitions 10 --workers 2 --fake-params --jobs 1 "$@" \
            --out "$R/$name" --json "$REV" "$cmd" > "$R/$name.json" 2> "$R/$name.log"
        echo "$name rc $?"; grep -E "per partition|busy|rror" "$R/$name.log" | head -4
    }
    run porep24-none
    run porep24-limit16g --engine device_memory_limit=16GiB
    run porep24-limit32g --engine device_memory_limit=32GiB
    ;;
esac
grep -E "proof_|warm_up|fake_params|pce_record|rror|panicked" $R/porep32g.log 2>/dev/null | grep -v "^wrote" | cut -c1-420 | tail -14
grep -o '"note":"[0-9]* bytes of parameters[^"]*"' $R/porep32g/timeline-*limit16g*.json 2>/dev/null | head -2
tail -2 $R/nvidia-smi.csv 2>/dev/null
mkdir -p $OUT && tar czf $OUT/r.tgz -C $W r
