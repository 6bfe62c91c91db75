#!/bin/bash
# [Q] round 4: bases with window multiples (every window into one set of
# buckets), G1 random 2^24 / 2^26, against the plain MSM of the same binary
# and run (msm_bench's random series), plus the GPU tests.
#   bash .device/q5/job5.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q5
NEW=${NEW:-unknown}
case "$1" in
start)
  mkdir -p $R
  setsid nohup bash .device/q5/job5.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  D=$(bash .device/q5/new/run.sh --unpack)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt
  for t in gpu_msm; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q5/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -3 $R/t_$t.log; done
  echo "== msm_bench $(date +%T)"
  MSM_BENCH_G2_MAX_LOG2=0 MSM_BENCH_CPU_BUDGET_S=0 MSM_BENCH_MULTIPLES=20,22,24 $D/bin/msm_bench $NEW "MSM_BENCH_G2_MAX_LOG2=0 MSM_BENCH_CPU_BUDGET_S=0 MSM_BENCH_MULTIPLES=20,22,24 msm_bench (bash .device/q5/job5.sh)" > $R/msm_bench.json 2> $R/msm_bench.err; echo rc=$?
  grep -E "multiples|random 2\^2[46]|MISMATCH" $R/msm_bench.err | head -30
  for t in gpu_prover; do echo "== $t $(date +%T)"; OUT=$R/t_$t bash .device/q5/new/run.sh $t > $R/t_$t.log 2>&1; echo rc=$?; tail -3 $R/t_$t.log; done
  echo "== end $(date +%T)"
  touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz -C /tmp q5 2>/dev/null
  tail -45 $R/job.log
  [ -f $R/DONE ] && echo ALLDONE ;;
esac
