#!/usr/bin/env bash
# Session 40's GPU experiment, in the background on the GPU machine.
#   bash .device/x1/s41.sh start [SECS]   start it (setsid), then wait up to SECS
#   bash .device/x1/s41.sh wait SECS      wait up to SECS more
# Either way, what is there so far is packed into $OUT/s41.tar.gz.
# STEPS picks steps (default "c2 ntt tests"): tests (gpu_engine, then GPU_TESTS of groth16_cuda), prover (gpu_prover),
# ntt (ntt_bench layouts at 2^24, 2^26), c2 (c2_bench 32G, five variants),
# mixed (mixed_bench with --stall-timeout).
set -uo pipefail
ROOT=$(pwd -P)
W=/tmp/s41
REV=$(cat "$ROOT/.device/bundle.rev" 2>/dev/null || echo unknown)
mkdir -p "$W"

pack() {
    [ -n "${OUT:-}" ] || return 0
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader >"$W/smi-now.txt" 2>&1
    free -g >"$W/free-now.txt" 2>&1
    ps aux --sort=-rss | head -5 >"$W/ps-now.txt" 2>&1
    tar -czf "$OUT/s41.tar.gz" -C "$W" --exclude=pce --exclude='*.bin' . 2>/dev/null
    tail -40 "$W/main.log" 2>/dev/null
}
wait_for() {
    local end=$((SECONDS + ${1:-500}))
    while [ $SECONDS -lt $end ] && [ ! -f "$W/done" ]; do sleep 5; done
    [ -f "$W/done" ] && echo "s41: all steps done" || echo "s41: still running"
    pack
}

steps() {
    set -x
    FILES=$(bash "${BUNDLE_DIR:-$ROOT/.device/bundle}/run.sh" --unpack) || exit 1
    BIN=$FILES/bin
    export CUZK_REQUIRE_GPU=1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    for step in ${STEPS:-c2 ntt tests}; do
        echo "=== $step $(date -u +%T)"
        case $step in
        tests)
            OUT=$W/tests bash "${BUNDLE_DIR:-$ROOT/.device/bundle}/run.sh" cuzk-engine.test.engine gpu_engine
            OUT=$W/tests2 CUZK_TEST_TIMEOUT=1500 bash "${BUNDLE_DIR:-$ROOT/.device/bundle}/run.sh" cuzk-groth16-cuda.test.groth16_cuda ${GPU_TESTS:-gpu_}
            ;;
        devmem)
            OUT=$W/tests4 CUZK_TEST_TIMEOUT=900 bash "${BUNDLE_DIR:-$ROOT/.device/bundle}/run.sh" cuzk-groth16-cuda.test.device_memory
            ;;
        prover)
            OUT=$W/tests3 CUZK_TEST_TIMEOUT=1500 bash "${BUNDLE_DIR:-$ROOT/.device/bundle}/run.sh" cuzk-groth16-cuda.test.groth16_cuda gpu_prover
            ;;
        ntt)
            NTT_BENCH_SIZES=24,26 NTT_BENCH_VARIANTS=layouts "$BIN/ntt_bench" "$REV" \
                "NTT_BENCH_SIZES=24,26 NTT_BENCH_VARIANTS=layouts ntt_bench REV CMD (.device/x1/s41.sh, CUZK_REQUIRE_GPU=1)" \
                >"$W/ntt.json" 2>"$W/ntt.log"
            ;;
        c2)
            (while :; do nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader; sleep 2; done) >"$W/c2-smi.csv" 2>&1 &
            SMI=$!
            # The bench's resident memory every second (which phase makes the peak).
            (while :; do echo "$(date -u +%T.%N | cut -c1-12) $(grep -h VmRSS /proc/$(pgrep -n c2_bench)/status 2>/dev/null)"; sleep 1; done) >"$W/c2-rss.txt" 2>&1 &
            RSS=$!
            V=${C2_VARIANTS:-"--variant default --variant pageable:gpu_pinned_uploads=false --variant bounce256:gpu_upload_buffer=256MiB --variant limit16:device_memory_limit=16GiB --variant limit16-abc-pageable:device_memory_limit=16GiB,gpu_pin_abc=false"}
            J=${C2_JOBS:-3}
            T=${C2_TOGETHER:-1}
            CMD="c2_bench --seal-proof StackedDrg32GiBV1_1 --jobs $J --together $T $V --seed 1 --fake-params --pce-dir DIR --out DIR --json REV CMD (.device/x1/s41.sh, CUZK_REQUIRE_GPU=1)"
            # shellcheck disable=SC2086
            "$BIN/c2_bench" --seal-proof StackedDrg32GiBV1_1 --jobs $J --together $T $V --seed 1 --fake-params \
                --pce-dir "$W/pce" --out "$W/c2" --json "$REV" "$CMD" >"$W/c2.json" 2>"$W/c2.log"
            echo "c2_bench rc=$?"
            kill $SMI $RSS
            ;;
        post)
            PV=${POST_VARIANTS:-}
            CMD="c2_bench --post-proof StackedDrgWindow32GiBV1_2 --jobs 2 $PV --seed 1 --fake-params --pce-dir DIR --out DIR --json REV CMD (.device/x1/s41.sh, CUZK_REQUIRE_GPU=1)"
            # shellcheck disable=SC2086
            "$BIN/c2_bench" --post-proof StackedDrgWindow32GiBV1_2 --jobs 2 $PV --seed 1 --fake-params \
                --pce-dir "$W/pce" --out "$W/post" --json "$REV" "$CMD" >"$W/post.json" 2>"$W/post.log"
            echo "post c2_bench rc=$?"
            ;;
        arith)
            # The new kernels beside fb1d04d's (before ff_mul_sub), alternately.
            mkdir -p "$W/old" && tar -xJf "$ROOT/.device/old/fb1d04d-bins.tar.xz" -C "$W/old"
            for k in 1 2; do
                "$W/old/arith_bench" fb1d04d "arith_bench REV CMD (.device/x1/s41.sh, fb1d04d's binary, CUZK_REQUIRE_GPU=1)" >"$W/arith-old-$k.json" 2>"$W/arith-old-$k.log"
                "$BIN/arith_bench" "$REV" "arith_bench REV CMD (.device/x1/s41.sh, CUZK_REQUIRE_GPU=1)" >"$W/arith-new-$k.json" 2>"$W/arith-new-$k.log"
            done
            echo "arith done"
            ;;
        msm)
            # The scatter's batches side by side in one process (1 = the serial kernel).
            export MSM_BENCH_VARIANTS_ONLY=1 MSM_BENCH_ACCUMULATE=PlainV4 MSM_BENCH_SCATTER=1,4,8,16 MSM_BENCH_CPU_BUDGET_S=0
            M="MSM_BENCH_VARIANTS_ONLY=1 MSM_BENCH_ACCUMULATE=PlainV4 MSM_BENCH_SCATTER=1,4,8,16 MSM_BENCH_CPU_BUDGET_S=0"
            "$BIN/msm_bench" "$REV" "$M msm_bench REV CMD (.device/x1/s41.sh, CUZK_REQUIRE_GPU=1)" >"$W/msm-new.json" 2>"$W/msm-new.log"
            rc=$?
            echo "msm done rc=$rc"
            unset MSM_BENCH_VARIANTS_ONLY MSM_BENCH_ACCUMULATE MSM_BENCH_SCATTER MSM_BENCH_CPU_BUDGET_S
            if [ $rc -ne 0 ] || grep -q differs "$W/msm-new.log"; then echo "msm_bench failed: stopping"; break; fi
            ;;
        mixed)
            CMD="mixed_bench --seal-proof StackedDrg32GiBV1_1 --post-proof StackedDrgWindow32GiBV1_2 --porep-jobs 1 --after 3 --budget 100GB --seed 1 --porep-alone --stall-timeout 180 --engine gpu_upload_buffer=256MiB --pce-dir DIR --out DIR --json REV CMD (.device/x1/s41.sh, CUZK_REQUIRE_GPU=1, RUST_LOG=info)"
            RUST_LOG=info "$BIN/mixed_bench" --seal-proof StackedDrg32GiBV1_1 --post-proof StackedDrgWindow32GiBV1_2 \
                --porep-jobs 1 --after 3 --budget 100GB --seed 1 --porep-alone --stall-timeout 180 --engine gpu_upload_buffer=256MiB \
                --pce-dir "$W/pce" --out "$W/mixed" --json "$REV" "$CMD" >"$W/mixed.json" 2>"$W/mixed.log"
            echo "mixed_bench rc=$?"
            ;;
        esac
    done
    echo "=== end $(date -u +%T)"
}

case "${1:-}" in
start)
    if [ -f "$W/pid" ] && kill -0 "$(cat "$W/pid")" 2>/dev/null; then
        echo "s41: already running"
    else
        rm -f "$W/done"
        setsid bash -c "BUNDLE_DIR='${BUNDLE_DIR:-}' STEPS='${STEPS:-}' GPU_TESTS='${GPU_TESTS:-}' C2_JOBS='${C2_JOBS:-}' C2_VARIANTS='${C2_VARIANTS:-}' C2_TOGETHER='${C2_TOGETHER:-}' MSM_ARGS='${MSM_ARGS:-}' POST_VARIANTS='${POST_VARIANTS:-}' bash '$0' steps >'$W/main.log' 2>&1; touch '$W/done'" </dev/null >/dev/null 2>&1 &
        echo $! >"$W/pid"
    fi
    wait_for "${2:-500}"
    ;;
wait) wait_for "${2:-500}" ;;
steps) steps ;;
*) echo "usage: s41.sh start|wait [SECS]" >&2; exit 2 ;;
esac
