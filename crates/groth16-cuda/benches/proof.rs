//! Whole proofs of the CUDA backend (`GpuProver::prove`: prepare, H, the
//! five MSMs, assembly) for the PoRep-shaped circuit with fake parameters
//! (the prover's real work; the proofs do not verify): `proof/porep/2^K`
//! with a/b/c evaluated on the CPU beforehand and uploaded, and
//! `proof/porep/2^K/gpu-abc` with a/b/c evaluated on the GPU from the
//! resident PCE. Witness synthesis is outside the measurement. 2^16 and
//! 2^18 by default; `CUZK_BENCH_LOG2=20,22` picks others. Without a GPU it
//! prints one skip line and measures nothing (`CUZK_REQUIRE_GPU=1`: fails).

#[path = "common/mod.rs"]
mod common;

use blstrs::Scalar;
use common::{have_gpu, sizes};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cuzk_groth16_cuda::fake::fake_params;
use cuzk_groth16_cuda::{AbcInput, GpuProver, Prover, ProverInput};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness, evaluate};

fn proof(c: &mut Criterion) {
    if !have_gpu("proof benches") {
        return;
    }
    let prover = GpuProver::new(0).expect("the GPU gpu_or_skip found");
    let mut group = c.benchmark_group("proof/porep");
    group.sample_size(10);
    for k in sizes(&[16, 18]) {
        let spec: CircuitSpec = format!("porep:{k}").parse().expect("a porep size in range");
        let pce = Pce::record(spec.build(0)).expect("the built-in circuit records");
        let params = fake_params(&pce, 1);
        let witness = Witness::synthesize_with_capacity(spec.build(1), pce.num_inputs, pce.num_aux)
            .expect("the built-in circuit synthesizes");
        let abc = evaluate(&pce, &witness).expect("shapes match");
        let (r, s) = (Scalar::from(5), Scalar::from(7));
        let evaluated = ProverInput {
            pce: &pce,
            witness: &witness,
            abc: AbcInput::Evaluated {
                a: &abc.a,
                b: &abc.b,
                c: &abc.c,
            },
        };
        let on_gpu = ProverInput {
            abc: AbcInput::FromPce,
            ..evaluated
        };
        // The first proof of a shape uploads the parameters (and the PCE for
        // gpu-abc): one-time work, out of the measurement.
        prover.prove(evaluated, &params, r, s).expect("proves");
        prover.prove(on_gpu, &params, r, s).expect("proves");
        group.bench_function(BenchmarkId::from_parameter(format!("2^{k}")), |b| {
            b.iter(|| prover.prove(evaluated, &params, r, s).expect("proves"))
        });
        group.bench_function(BenchmarkId::new(format!("2^{k}"), "gpu-abc"), |b| {
            b.iter(|| prover.prove(on_gpu, &params, r, s).expect("proves"))
        });
        prover.evict_params();
        prover.evict_pces();
    }
    group.finish();
}

criterion_group!(benches, proof);
criterion_main!(benches);
