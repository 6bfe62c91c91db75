#!/bin/bash
# [Q] round 5, second run: G2 with lazy Fq2 multiplication and mul_sub (a b - c d
# on six wide products, two reductions) and G2's Auto accumulation PlainV4.
# Baseline: the bundle of main 8c55337 (.device/q7/new, same kernels as
# 6f288c5); new: .device/q9/new. Same machine, one run:
#   tests (new), msm_bench G2 (base, new), proof_bench porep:24 with window
#   multiples (base, new), then porep:24/26 without them (new).
#   bash .device/q9/job9.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q9
NEW=${NEW:-unknown}
BASE=${BASE:-8c55337}
case "$1" in
start)
  mkdir -p $R
  setsid nohup bash .device/q9/job9.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  DB=$(bash .device/q7/new/run.sh --unpack)
  DN=$(bash .device/q9/new/run.sh --unpack)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  for t in gpu_arith gpu_msm gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q9/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -2 $R/t_$t.log; done
  for v in base new; do
    if [ $v = base ]; then D=$DB; REV=$BASE; else D=$DN; REV=$NEW; fi
    echo "== msm_bench g2 $v ($REV) $(date +%T)"
    MSM_BENCH_MAX_LOG2=20 MSM_BENCH_CPU_BUDGET_S=0 MSM_BENCH_G2_MULTIPLES=22 $D/bin/msm_bench $REV "MSM_BENCH_MAX_LOG2=20 MSM_BENCH_CPU_BUDGET_S=0 MSM_BENCH_G2_MULTIPLES=22 msm_bench ($v bundle, bash .device/q9/job9.sh)" > $R/msm_bench_$v.json 2> $R/msm_bench_$v.err; echo rc=$?
    grep -E "g2 random|MISMATCH|rror" $R/msm_bench_$v.err | cut -c1-200 | head -12
  done
  for v in base new; do
    if [ $v = base ]; then D=$DB; REV=$BASE; else D=$DN; REV=$NEW; fi
    echo "== proof_bench $v ($REV) $(date +%T)"
    $D/bin/proof_bench $REV "proof_bench --sizes 24 --runs 3 --bellperson-max 0 --window-multiples true ($v bundle, bash .device/q9/job9.sh)" --sizes 24 --runs 3 --bellperson-max 0 --window-multiples true > $R/proof_bench_$v.json 2> $R/proof_bench_$v.err; echo rc=$?
    grep -E "warm-up|run [0-9]|rror" $R/proof_bench_$v.err | tail -7
  done
  echo "== proof_bench new, no window multiples ($NEW) $(date +%T)"
  $DN/bin/proof_bench $NEW "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 --window-multiples false (new bundle, bash .device/q9/job9.sh)" --sizes 24,26 --runs 3 --bellperson-max 0 --window-multiples false > $R/proof_bench_new_plain.json 2> $R/proof_bench_new_plain.err; echo rc=$?
  grep -E "warm-up|run [0-9]|rror" $R/proof_bench_new_plain.err | tail -14
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz -C /tmp q9 2>/dev/null
  tail -60 $R/job.log
  [ -f $R/DONE ] && echo ALLDONE ;;
esac
