#!/bin/bash
# [Q] round 4, second run: whole proofs with and without window multiples
# (GpuOptions::window_multiples) in one run, the prover's GPU tests, and G2
# MSMs over bases with window multiples.
#   bash .device/q6/job6.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q6
NEW=${NEW:-unknown}
case "$1" in
start)
  mkdir -p $R
  setsid nohup bash .device/q6/job6.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  D=$(bash .device/q6/new/run.sh --unpack)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  for t in gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q6/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -3 $R/t_$t.log; done
  for wm in false true; do
    echo "== proof_bench window_multiples=$wm $(date +%T)"
    $D/bin/proof_bench $NEW "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 --window-multiples $wm (bash .device/q6/job6.sh)" --sizes 24,26 --runs 3 --bellperson-max 0 --window-multiples $wm > $R/proof_bench_wm_$wm.json 2> $R/proof_bench_wm_$wm.err; echo rc=$?
    grep -E "warm-up|run [0-9]" $R/proof_bench_wm_$wm.err | tail -14
  done
  echo "== msm_bench g2 $(date +%T)"
  MSM_BENCH_MAX_LOG2=20 MSM_BENCH_CPU_BUDGET_S=0 MSM_BENCH_G2_MULTIPLES=20,22,24 $D/bin/msm_bench $NEW "MSM_BENCH_MAX_LOG2=20 MSM_BENCH_CPU_BUDGET_S=0 MSM_BENCH_G2_MULTIPLES=20,22,24 msm_bench (bash .device/q6/job6.sh)" > $R/msm_bench_g2.json 2> $R/msm_bench_g2.err; echo rc=$?
  grep -E "g2 random|multiples|MISMATCH" $R/msm_bench_g2.err | head -20
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz -C /tmp q6 2>/dev/null
  tail -50 $R/job.log
  [ -f $R/DONE ] && echo ALLDONE ;;
esac
