#!/bin/bash
# [Q] round 3: dedicated squaring (mont_t::sqr) and 16-byte base loads in the
# accumulation (variants PlainV4, Prefetch128V4), against main f0e548b's
# kernels (binaries of b0e4343 / d07eeed: same kernels), same machine, one run.
#   bash .device/q3/job3.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q3
NEW=782971c
OLD=f0e548b
case "$1" in
start)
  mkdir -p $R/old
  for f in msm_bench proof_bench; do xz -dc .device/q2/$f.xz > $R/old/$f; done
  OLDD=$(bash .device/q/new/run.sh --unpack); cp $OLDD/bin/arith_bench $R/old/; chmod +x $R/old/*
  setsid nohup bash .device/q3/job3.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  D=$(bash .device/q3/new/run.sh --unpack)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  for t in gpu_arith gpu_msm; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q3/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -3 $R/t_$t.log; done
  for v in old new; do
    echo "== arith_bench $v $(date +%T)"; if [ $v = old ]; then X=$R/old/arith_bench; REV=$OLD; else X=$D/bin/arith_bench; REV=$NEW; fi
    $X $REV "arith_bench (bash .device/q3/job3.sh, $v)" > $R/arith_bench_$v.json 2> $R/arith_bench_$v.err; echo rc=$?; done
  for v in old new; do
    echo "== msm_bench $v $(date +%T)"; if [ $v = old ]; then X=$R/old/msm_bench; REV=$OLD; else X=$D/bin/msm_bench; REV=$NEW; fi
    MSM_BENCH_CPU_BUDGET_S=0 $X $REV "MSM_BENCH_CPU_BUDGET_S=0 msm_bench (bash .device/q3/job3.sh, $v)" > $R/msm_bench_$v.json 2> $R/msm_bench_$v.err; echo rc=$?; done
  for v in old new; do
    echo "== proof_bench $v $(date +%T)"; if [ $v = old ]; then X=$R/old/proof_bench; REV=$OLD; else X=$D/bin/proof_bench; REV=$NEW; fi
    $X $REV "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 (bash .device/q3/job3.sh, $v)" --sizes 24,26 --runs 3 --bellperson-max 0 > $R/proof_bench_$v.json 2> $R/proof_bench_$v.err; echo rc=$?; done
  for t in gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q3/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -3 $R/t_$t.log; done
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz --exclude=q3/old -C /tmp q3 2>/dev/null
  tail -40 $R/job.log
  [ -f $R/DONE ] && echo ALLDONE ;;
esac
