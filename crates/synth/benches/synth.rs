//! CPU synthesis of the built-in PoRep-shaped circuit (`porep:K`, 2^K
//! constraints): recording its PCE (`Pce::record`, once per circuit shape),
//! the witness (`Witness::synthesize_with_capacity`) and a/b/c by SpMV
//! (`evaluate`), ids `pce/porep/2^K`, `witness/porep/2^K` and
//! `spmv/porep/2^K`; and the witness of `parts:2048` with and without
//! parallel parts (`witness/parts/2048/{extended,sequential}`); and the
//! witness of SHA-256 of a PoRep label's 1248 bytes by bellperson's gadget
//! and by `native::sha256` (`witness/sha256/1248/{bellperson,native}`).
//! Sizes 2^14 and 2^16 by default; `CUZK_BENCH_LOG2=18,20` picks others.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cuzk_synth::circuits::CircuitSpec;
use cuzk_synth::{Pce, Witness, evaluate};

/// log2 sizes from `CUZK_BENCH_LOG2` (comma-separated), else `default`.
fn sizes(default: &[u32]) -> Vec<u32> {
    match std::env::var("CUZK_BENCH_LOG2") {
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("CUZK_BENCH_LOG2={v}: not a list of log2 sizes"))
            })
            .collect(),
        _ => default.to_vec(),
    }
}

fn synthesis(c: &mut Criterion) {
    for k in sizes(&[14, 16]) {
        let spec: CircuitSpec = format!("porep:{k}").parse().expect("a porep size in range");
        let pce = Pce::record(spec.build(0)).expect("the built-in circuit records");
        let size = format!("2^{k}");
        let rows = Throughput::Elements(1 << k);

        let mut group = c.benchmark_group("pce");
        group.throughput(rows.clone()).sample_size(10);
        group.bench_function(BenchmarkId::new("porep", &size), |b| {
            b.iter(|| Pce::record(spec.build(0)).expect("the built-in circuit records"))
        });
        group.finish();

        let mut group = c.benchmark_group("witness");
        group.throughput(rows.clone()).sample_size(10);
        group.bench_function(BenchmarkId::new("porep", &size), |b| {
            b.iter(|| {
                Witness::synthesize_with_capacity(spec.build(1), pce.num_inputs, pce.num_aux)
                    .expect("the built-in circuit synthesizes")
            })
        });
        group.finish();

        let witness = Witness::synthesize_with_capacity(spec.build(1), pce.num_inputs, pce.num_aux)
            .expect("the built-in circuit synthesizes");
        let mut group = c.benchmark_group("spmv");
        group.throughput(rows).sample_size(10);
        group.bench_function(BenchmarkId::new("porep", &size), |b| {
            b.iter(|| evaluate(black_box(&pce), black_box(&witness)).expect("shapes match"))
        });
        group.finish();
    }
}

/// The witness of `parts:N` (independent parts, like WindowPoSt's sectors)
/// synthesized through `extend` in parallel, and one part after the other:
/// ids `witness/parts/N/extended` and `witness/parts/N/sequential`.
fn parts(c: &mut Criterion) {
    use cuzk_synth::circuits::Parts;
    let n = 2048;
    let mut group = c.benchmark_group("witness");
    group
        .throughput(Throughput::Elements(35 * n + 1))
        .sample_size(10);
    group.bench_function(BenchmarkId::new("parts", format!("{n}/extended")), |b| {
        b.iter(|| Witness::synthesize(Parts::new(n as u32, 1)).expect("parts synthesize"))
    });
    group.bench_function(BenchmarkId::new("parts", format!("{n}/sequential")), |b| {
        b.iter(|| {
            Witness::synthesize(Parts::new(n as u32, 1).sequential()).expect("parts synthesize")
        })
    });
    group.finish();
}

/// SHA-256 of 1248 allocated bytes (a PoRep label's input) on a
/// [`WitnessCs`](cuzk_synth::WitnessCs), by bellperson's gadget and
/// natively: ids `witness/sha256/1248/{bellperson,native}`.
fn sha256(c: &mut Criterion) {
    use bellperson::ConstraintSystem;
    use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
    use cuzk_synth::WitnessCs;

    let bytes = 1248usize;
    let bits: Vec<bool> = (0..bytes * 8)
        .map(|i| (i * 0x9e37_79b9usize).count_ones() % 2 == 1)
        .collect();
    let input = |cs: &mut WitnessCs| -> Vec<Boolean> {
        bits.iter()
            .map(|&b| Boolean::from(AllocatedBit::alloc(&mut *cs, Some(b)).expect("allocates")))
            .collect()
    };
    let mut group = c.benchmark_group("witness");
    group
        .throughput(Throughput::Bytes(bytes as u64))
        .sample_size(20);
    group.bench_function(
        BenchmarkId::new("sha256", format!("{bytes}/bellperson")),
        |b| {
            b.iter(|| {
                let mut cs = WitnessCs::with_capacity(1, 1 << 20);
                let bits = input(&mut cs);
                bellperson::gadgets::sha256::sha256(cs.namespace(|| "sha256"), &bits)
                    .expect("bellperson's sha256");
                cs
            })
        },
    );
    group.bench_function(BenchmarkId::new("sha256", format!("{bytes}/native")), |b| {
        b.iter(|| {
            let mut cs = WitnessCs::with_capacity(1, 1 << 20);
            let bits = input(&mut cs);
            cuzk_synth::native::sha256::sha256(cs.namespace(|| "sha256"), &bits)
                .expect("native sha256");
            cs
        })
    });
    group.finish();
}

criterion_group!(benches, synthesis, parts, sha256);
criterion_main!(benches);
