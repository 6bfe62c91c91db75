#!/usr/bin/env bash
# Session 33, one short lease: the 32 GiB PoRep C2 stream at head (3 proofs,
# default configuration), then the mixed workload with the stall watchdog
# (its (c) hung in session 31); in the background (setsid):
#   bash .device/x1/s33.sh start | wait SECS
set -u
cd "$(dirname "$0")/../.."
export CUZK_REQUIRE_GPU=1
R=/tmp/s33; mkdir -p $R
BUNDLE=${BUNDLE:-.device/bundle2}
REV=$(cat $BUNDLE.rev 2>/dev/null || cat .device/x1/rev)
case "$1" in
start)
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; free -g; df -h /tmp; } > $R/smi.txt 2>&1
    BUNDLE=$BUNDLE setsid nohup bash .device/x1/s33.sh chain < /dev/null > $R/chain.log 2>&1 &
    ;;
chain)
    s() { date +%s > $R/$1.start; }
    DN=$(bash $BUNDLE/run.sh --unpack); B=$DN/bin
    mkdir -p $R/porep $R/mixed $R/tests
    s tests
    # The GPU paths this revision changed: a/b/c from the host (page-locked
    # or through bounce buffers), H's two buffers through bounce buffers,
    # the engine with gpu_pin_abc=false.
    ( OUT=$R/tests CUZK_TEST_LOG2=22 timeout 200 bash $BUNDLE/run.sh cuzk-groth16-cuda.test.groth16_cuda \
        host_staging h_matches_cpu_for_every_power_of_two > $R/tests/groth16.txt 2>&1
      OUT=$R/tests/engine timeout 150 bash $BUNDLE/run.sh cuzk-engine.test.engine gpu_backend_jobs > $R/tests/engine.txt 2>&1
      echo $? > $R/tests.rc )
    s porep
    V="--variant default --variant ahead2:synthesis_ahead=2"
    ( cd $R && RUST_LOG=info /usr/bin/time -v $B/c2_bench --seal-proof StackedDrg32GiBV1_1 --jobs 3 $V \
        --seed 1 --fake-params --pce-dir /tmp/pce --out $R/porep \
        --json "$REV" "c2_bench --seal-proof StackedDrg32GiBV1_1 --jobs 3 $V --seed 1 --fake-params --pce-dir DIR --out DIR --json REV CMD (.device/x1/s33.sh, CUZK_REQUIRE_GPU=1)" \
        > $R/porep.json 2> $R/porep.log; echo $? > $R/porep.rc )
    ARGS="--seal-proof StackedDrg32GiBV1_1 --post-proof StackedDrgWindow32GiBV1_2 --porep-jobs 1 --after 3 --budget 100GB --seed 1 --porep-alone --stall-timeout 150"
    s mixed
    ( cd $R && RUST_LOG=info,cuzk_engine::engine::builder=debug /usr/bin/time -v $B/mixed_bench $ARGS --pce-dir /tmp/pce --out $R/mixed \
        --json "$REV" "mixed_bench $ARGS --pce-dir DIR --out DIR --json REV CMD (.device/x1/s33.sh, CUZK_REQUIRE_GPU=1)" \
        > $R/mixed.json 2> $R/mixed.log; echo $? > $R/mixed.rc )
    touch $R/done
    ;;
wait)
    while [ $SECONDS -lt ${2:-500} ] && [ ! -f $R/done ]; do sleep 5; done
    ;;
esac
for f in $R/*.rc; do echo "$(basename $f .rc) rc $(cat $f)"; done 2>/dev/null
for f in $R/*.start; do echo "$(basename $f .start) started $(( $(date +%s) - $(cat $f) )) s ago"; done 2>/dev/null
cat $R/tests/*.txt 2>/dev/null | tail -20
for n in porep mixed; do [ -f $R/$n.log ] && { echo "== $n"; grep -vE "^\s+(Page|Minor|Major|Volun|Invol|Swaps|File|Socket|Signals|Average|Exit|Percent|System|User)" $R/$n.log | grep -vE "^wrote| INFO | DEBUG |^\s" | cut -c1-300 | tail -14; grep -E "Maximum resident|Elapsed" $R/$n.log; }; done
[ -f $R/done ] && echo ALL-DONE
mkdir -p $OUT && tar czf $OUT/s33.tgz --exclude='*/timeline-*' -C /tmp s33 2>/dev/null; ls -la $OUT
