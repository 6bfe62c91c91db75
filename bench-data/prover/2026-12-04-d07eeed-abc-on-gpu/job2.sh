#!/bin/bash
# [Q] round 2 (d07eeed): proof_bench with a, b, c evaluated on the GPU;
# msm_bench G2 with Fq multiplications inlined (variant) against committed.
#   bash .device/q2/job2.sh start | wait SECS
cd "$(dirname "$0")/../.."
R=/tmp/q2
case "$1" in
start)
  mkdir -p $R/bin; for f in .device/q2/*.xz; do xz -dc $f > $R/bin/$(basename $f .xz); done; chmod +x $R/bin/*
  setsid nohup bash .device/q2/job2.sh body > $R/job.log 2>&1 < /dev/null &
  echo started ;;
body)
  export CUZK_REQUIRE_GPU=1
  echo "== proof_bench $(date +%T)"
  $R/bin/proof_bench d07eeed "proof_bench --sizes 24,26 --runs 3 --bellperson-max 0 (bash .device/q2/job2.sh)" --sizes 24,26 --runs 3 --bellperson-max 0 > $R/proof_bench.json 2> $R/proof_bench.err; echo rc=$?
  for v in msm_bench msm_bench_g2inline; do echo "== $v $(date +%T)"
    MSM_BENCH_MAX_LOG2=20 MSM_BENCH_CPU_BUDGET_S=0 $R/bin/$v d07eeed "MSM_BENCH_MAX_LOG2=20 MSM_BENCH_CPU_BUDGET_S=0 msm_bench (bash .device/q2/job2.sh: $v)" > $R/$v.json 2> $R/$v.err; echo rc=$?; done
  echo "== end $(date +%T)"; touch $R/DONE ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -f $R/DONE ] && [ $(date +%s) -lt $end ]; do sleep 5; done
  mkdir -p $OUT; tar czf $OUT/r.tgz --exclude=q2/bin -C /tmp q2
  cat $R/job.log; tail -3 $R/*.err ;;
esac
