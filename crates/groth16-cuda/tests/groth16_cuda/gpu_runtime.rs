//! The CUDA runtime layer (`cuzk_groth16_cuda::cuda`) on a real GPU: device
//! handles, byte-exact round trips of every device element type, kernel
//! launches with buffers and by-value field elements, and errors that name
//! the module and kernel at fault. Without a GPU each test prints a skip
//! (`CUZK_REQUIRE_GPU=1` makes that a failure).
//!
//! The kernels launched here are this file's own PTX ([`TEST_PTX`]), so the
//! runtime is tested apart from the field and curve kernels in `kernels/`.

use std::sync::Arc;

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_sched::testing::gpu_or_skip;
use cuzk_groth16_cuda::{
    Groth16Error,
    cuda::{DeviceElem, DeviceModule, Gpu, LaunchConfig, grid_1d, modules},
};
use ff::{Field, PrimeField};
use group::{Curve, Group, prime::PrimeCurveAffine};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Three kernels, hand-written PTX (checked with `ptxas -arch=sm_80` and
/// `sm_90`):
/// - `cuzk_test_add_u32(uint32_t* out, const uint32_t* in, uint32_t add, uint32_t n)`:
///   `out[i] = in[i] + add` for `i < n`;
/// - `cuzk_test_copy_u64(uint64_t* out, const uint64_t* in, uint32_t n)`:
///   `out[i] = in[i]` for `i < n`;
/// - `cuzk_test_store_fr(uint64_t* out, fr_t s)` with
///   `struct fr_t { uint64_t l[4]; }` passed by value: thread 0 writes the
///   four limbs of `s` to `out[0..4]`.
const TEST_PTX: &str = r#"
.version 7.0
.target sm_80
.address_size 64

.visible .entry cuzk_test_add_u32(
	.param .u64 out,
	.param .u64 in,
	.param .u32 add,
	.param .u32 n
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<6>;

	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mad.lo.s32 	%r4, %r1, %r2, %r3;
	ld.param.u32 	%r5, [n];
	setp.ge.u32 	%p1, %r4, %r5;
	@%p1 bra 	ADD_DONE;
	ld.param.u64 	%rd1, [out];
	ld.param.u64 	%rd2, [in];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mul.wide.u32 	%rd3, %r4, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.u32 	%r6, [%rd4];
	ld.param.u32 	%r7, [add];
	add.s32 	%r6, %r6, %r7;
	add.s64 	%rd5, %rd1, %rd3;
	st.global.u32 	[%rd5], %r6;
ADD_DONE:
	ret;
}

.visible .entry cuzk_test_copy_u64(
	.param .u64 out,
	.param .u64 in,
	.param .u32 n
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<7>;

	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mad.lo.s32 	%r4, %r1, %r2, %r3;
	ld.param.u32 	%r5, [n];
	setp.ge.u32 	%p1, %r4, %r5;
	@%p1 bra 	COPY_DONE;
	ld.param.u64 	%rd1, [out];
	ld.param.u64 	%rd2, [in];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mul.wide.u32 	%rd3, %r4, 8;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.u64 	%rd6, [%rd4];
	add.s64 	%rd5, %rd1, %rd3;
	st.global.u64 	[%rd5], %rd6;
COPY_DONE:
	ret;
}

.visible .entry cuzk_test_store_fr(
	.param .u64 out,
	.param .align 8 .b8 s[32]
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<6>;

	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %tid.x;
	or.b32 	%r3, %r1, %r2;
	setp.ne.s32 	%p1, %r3, 0;
	@%p1 bra 	STORE_DONE;
	ld.param.u64 	%rd1, [out];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u64 	%rd2, [s];
	ld.param.u64 	%rd3, [s+8];
	ld.param.u64 	%rd4, [s+16];
	ld.param.u64 	%rd5, [s+24];
	st.global.u64 	[%rd1], %rd2;
	st.global.u64 	[%rd1+8], %rd3;
	st.global.u64 	[%rd1+16], %rd4;
	st.global.u64 	[%rd1+24], %rd5;
STORE_DONE:
	ret;
}
"#;

const TEST_MODULE: DeviceModule = DeviceModule::ptx("cuzk_test", TEST_PTX);

/// GPU 0's handle, or `None` (after printing the skip) without a GPU.
fn gpu(test: &str) -> Option<Arc<Gpu>> {
    let devices = gpu_or_skip(test)?;
    let gpu = Gpu::get(devices[0].ordinal).expect("opening the first GPU");
    eprintln!("{test}: GPU {} ({})", gpu.ordinal(), gpu.name());
    Some(gpu)
}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(0x6375_7a6b)
}

/// The bytes of `values` as they lie in host memory.
fn bytes<T: DeviceElem>(values: &[T]) -> &[u8] {
    // SAFETY: `DeviceElem` types have no padding, so every byte of the slice
    // is initialised; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// The host bytes of `values` as little-endian 64-bit words.
fn words<T: DeviceElem>(values: &[T]) -> Vec<u64> {
    bytes(values)
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

/// Uploads, downloads and checks the values come back byte for byte (and
/// through `copy_to_host` too).
fn round_trip<T: DeviceElem + PartialEq + std::fmt::Debug>(gpu: &Arc<Gpu>, values: &[T]) {
    let type_name = std::any::type_name::<T>();
    let buffer = gpu.upload(values).expect("upload");
    assert_eq!(buffer.len(), values.len(), "{type_name}");
    assert_eq!(buffer.size_bytes(), std::mem::size_of_val(values));
    assert_eq!(buffer.gpu().ordinal(), gpu.ordinal());
    let back = buffer.download().expect("download");
    assert!(bytes(&back) == bytes(values), "{type_name}: bytes differ");
    assert_eq!(back, values, "{type_name}");
    let mut again = back.clone();
    again.reverse();
    buffer.copy_to_host(&mut again).expect("copy_to_host");
    assert!(bytes(&again) == bytes(values), "{type_name}: bytes differ");
}

#[test]
fn gpu_round_trip_scalars() {
    let Some(gpu) = gpu("gpu_round_trip_scalars") else {
        return;
    };
    let mut rng = rng();
    let mut values = vec![
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        Scalar::from(u64::MAX),
        Scalar::ROOT_OF_UNITY,
    ];
    values.extend((0..1000).map(|_| Scalar::random(&mut rng)));
    round_trip(&gpu, &values);
}

#[test]
fn gpu_round_trip_g1_affine() {
    let Some(gpu) = gpu("gpu_round_trip_g1_affine") else {
        return;
    };
    let mut rng = rng();
    let mut values = vec![
        G1Affine::identity(),
        G1Affine::generator(),
        -G1Affine::generator(),
    ];
    let projective: Vec<G1Projective> = (0..257).map(|_| G1Projective::random(&mut rng)).collect();
    let mut affine = vec![G1Affine::identity(); projective.len()];
    G1Projective::batch_normalize(&projective, &mut affine);
    values.extend(affine);
    values.push(G1Affine::identity());
    round_trip(&gpu, &values);
    let back = gpu.upload(&values).unwrap().download().unwrap();
    assert!(bool::from(back[0].is_identity()));
    assert!(bool::from(back[values.len() - 1].is_identity()));
    assert!(bool::from(back[1].is_on_curve()));
}

#[test]
fn gpu_round_trip_g2_affine() {
    let Some(gpu) = gpu("gpu_round_trip_g2_affine") else {
        return;
    };
    let mut rng = rng();
    let mut values = vec![
        G2Affine::identity(),
        G2Affine::generator(),
        -G2Affine::generator(),
    ];
    values.extend((0..65).map(|_| G2Projective::random(&mut rng).to_affine()));
    round_trip(&gpu, &values);
    let back = gpu.upload(&values).unwrap().download().unwrap();
    assert!(bool::from(back[0].is_identity()));
}

#[test]
fn gpu_round_trip_other_types() {
    let Some(gpu) = gpu("gpu_round_trip_other_types") else {
        return;
    };
    let mut rng = rng();
    let fp: Vec<Fp> = (0..100).map(|_| Fp::random(&mut rng)).collect();
    round_trip(&gpu, &fp);
    let fp2: Vec<Fp2> = (0..100).map(|_| Fp2::random(&mut rng)).collect();
    round_trip(&gpu, &fp2);
    let mut g1: Vec<G1Projective> = (0..50).map(|_| G1Projective::random(&mut rng)).collect();
    g1.push(G1Projective::identity());
    round_trip(&gpu, &g1);
    let mut g2: Vec<G2Projective> = (0..50).map(|_| G2Projective::random(&mut rng)).collect();
    g2.push(G2Projective::identity());
    round_trip(&gpu, &g2);
    let b: Vec<u8> = (0..1001).map(|_| rng.r#gen()).collect();
    round_trip(&gpu, &b);
    let w: Vec<u32> = (0..1001).map(|_| rng.r#gen()).collect();
    round_trip(&gpu, &w);
    let d: Vec<u64> = (0..1001).map(|_| rng.r#gen()).collect();
    round_trip(&gpu, &d);
}

#[test]
fn gpu_zeros_are_zero_and_identity() {
    let Some(gpu) = gpu("gpu_zeros_are_zero_and_identity") else {
        return;
    };
    let scalars = gpu.alloc_zeros::<Scalar>(333).unwrap().download().unwrap();
    assert_eq!(scalars, vec![Scalar::ZERO; 333]);
    let g1 = gpu.alloc_zeros::<G1Affine>(77).unwrap().download().unwrap();
    assert!(g1.iter().all(|p| bool::from(p.is_identity())));
    let g2 = gpu.alloc_zeros::<G2Affine>(77).unwrap().download().unwrap();
    assert!(g2.iter().all(|p| bool::from(p.is_identity())));
}

#[test]
fn gpu_copies_check_lengths_and_empty_buffers_work() {
    let Some(gpu) = gpu("gpu_copies_check_lengths_and_empty_buffers_work") else {
        return;
    };
    let mut buffer = gpu.alloc_zeros::<Scalar>(10).unwrap();
    let err = buffer.copy_from_host(&[Scalar::ONE; 9]).unwrap_err();
    assert!(
        matches!(
            err,
            Groth16Error::CopyLength {
                device: 10,
                host: 9,
                ..
            }
        ),
        "{err}"
    );
    let mut short = [Scalar::ZERO; 11];
    let err = buffer.copy_to_host(&mut short).unwrap_err().to_string();
    assert!(
        err.contains("the device buffer holds 10 elements, the host slice 11"),
        "{err}"
    );
    let values: Vec<Scalar> = (1..=10u64).map(Scalar::from).collect();
    buffer.copy_from_host(&values).unwrap();
    assert_eq!(buffer.download().unwrap(), values);

    let empty = gpu.upload::<Scalar>(&[]).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.download().unwrap(), Vec::<Scalar>::new());
    let mut empty = gpu.alloc_zeros::<G2Affine>(0).unwrap();
    empty.copy_from_host(&[]).unwrap();
    empty.copy_to_host(&mut []).unwrap();
    assert!(empty.download().unwrap().is_empty());
}

/// `copy_from_host_through` writes exactly the range `copy_from_host_at`
/// would: bounce buffers of one element, of a few elements that do not
/// divide the source, and of unequal sizes; sources of 0, 1 and many
/// pieces at offsets that leave elements on both sides untouched; a range
/// past the end and buffers that are not page-locked are refused.
#[test]
fn gpu_uploads_through_bounce_buffers_equal_plain_copies() {
    use cuzk_pinned_pool::{CpuAccess, Pool, PoolConfig, Request};
    let Some(gpu) = gpu("gpu_uploads_through_bounce_buffers_equal_plain_copies") else {
        return;
    };
    let pool = Pool::pinned(gpu.ordinal(), PoolConfig::unbounded()).expect("a pinned pool");
    let lease = |bytes: usize| {
        pool.lease(Request::bytes(bytes).access(CpuAccess::WriteOnly))
            .expect("a page-locked lease")
    };
    let mut rng = rng();
    let len = 1000;
    let before: Vec<Scalar> = (0..len).map(|_| Scalar::random(&mut rng)).collect();
    let fill = |dst: &mut [u8], src: &[u8]| dst.copy_from_slice(src);
    // A piece is as many whole elements as the shorter buffer holds.
    for (b0, b1) in [(32, 32), (96, 96), (100, 4096), (1 << 20, 64)] {
        for (offset, n) in [(0, 0), (3, 1), (0, len), (7, 500), (1, 998), (999, 1)] {
            let src: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let mut expected = before.clone();
            expected[offset..offset + n].copy_from_slice(&src);
            let mut buffer = gpu.upload(&before).unwrap();
            let mut bounce = [lease(b0), lease(b1)];
            buffer
                .copy_from_host_through(offset, &src, &mut bounce, fill)
                .unwrap_or_else(|e| panic!("buffers {b0}/{b1}, {n} at {offset}: {e}"));
            assert!(
                buffer.download().unwrap() == expected,
                "buffers {b0}/{b1}, {n} at {offset}: the device range differs"
            );
        }
    }
    let mut buffer = gpu.upload(&before).unwrap();
    let mut bounce = [lease(64), lease(64)];
    let err = buffer
        .copy_from_host_through(len - 1, &before[..2], &mut bounce, fill)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Groth16Error::CopyLength {
                device: 1000,
                host: 1001,
                ..
            }
        ),
        "{err}"
    );
    let pageable = Pool::fallback(PoolConfig::unbounded());
    let mut bounce = [
        pageable.lease(Request::bytes(64)).unwrap(),
        pageable.lease(Request::bytes(64)).unwrap(),
    ];
    let err = buffer
        .copy_from_host_through(0, &before[..4], &mut bounce, fill)
        .unwrap_err()
        .to_string();
    assert!(err.contains("must be page-locked"), "{err}");
    let mut tiny = [lease(16), lease(64)];
    let err = buffer
        .copy_from_host_through(0, &before[..4], &mut tiny, fill)
        .unwrap_err()
        .to_string();
    assert!(err.contains("hold at least one Scalar"), "{err}");
    assert!(buffer.download().unwrap() == before, "a refused copy wrote");
}

#[test]
fn gpu_handles_are_shared_and_bad_ordinals_refused() {
    let Some(gpu) = gpu("gpu_handles_are_shared_and_bad_ordinals_refused") else {
        return;
    };
    assert!(Arc::ptr_eq(&gpu, &Gpu::get(gpu.ordinal()).unwrap()));
    let count = cuzk_gpu_sched::discover().unwrap().len();
    let err = Gpu::get(count).unwrap_err();
    assert!(matches!(err, Groth16Error::NoGpu { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "GPU {count} was asked for, but the CUDA driver sees {count}"
        )),
        "{err}"
    );
    gpu.synchronize().unwrap();
}

/// Not a GPU test: on every machine, opening a GPU either works or is a
/// clean `NoGpu` error, never a panic.
#[test]
fn opening_a_gpu_never_panics() {
    let devices = cuzk_gpu_sched::discover().expect("device discovery");
    match Gpu::get(0) {
        Ok(gpu) => assert!(
            !devices.is_empty(),
            "opened {gpu:?} but discovery found none"
        ),
        Err(Groth16Error::NoGpu { reason }) => {
            assert!(devices.is_empty(), "{reason}");
            eprintln!("no GPU, as expected here: {reason}");
        }
        Err(err) => panic!("unexpected error: {err}"),
    }
}

#[test]
fn gpu_launches_test_kernels() {
    let Some(gpu) = gpu("gpu_launches_test_kernels") else {
        return;
    };
    let mut rng = rng();

    // u32 arithmetic over a length that is not a multiple of the block.
    let add = gpu.kernel_in(&TEST_MODULE, "cuzk_test_add_u32").unwrap();
    assert_eq!(add.module(), "cuzk_test");
    assert_eq!(add.name(), "cuzk_test_add_u32");
    let input: Vec<u32> = (0..1001).map(|_| rng.r#gen()).collect();
    let n = input.len() as u32;
    let plus = 0x9e37_79b9u32;
    let mut out = gpu.alloc_zeros::<u32>(input.len()).unwrap();
    {
        let input = gpu.upload(&input).unwrap();
        // SAFETY: cuzk_test_add_u32(uint32_t* out, const uint32_t* in,
        // uint32_t add, uint32_t n); both buffers hold n elements and the
        // kernel touches index i only when i < n.
        unsafe {
            add.args()
                .buf_mut(&mut out)
                .buf(&input)
                .arg(&plus)
                .arg(&n)
                .launch(grid_1d(input.len(), 128).unwrap())
                .unwrap();
        }
        // `input` is dropped here, possibly before the kernel ran: its memory
        // is freed in stream order, after the kernel.
    }
    let expected: Vec<u32> = input.iter().map(|x| x.wrapping_add(plus)).collect();
    assert_eq!(out.download().unwrap(), expected);

    // The device holds blstrs' own bytes: the kernel copies them as 64-bit
    // words and they equal the host's Montgomery limbs.
    let copy = gpu.kernel_in(&TEST_MODULE, "cuzk_test_copy_u64").unwrap();
    let mut scalars = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
    scalars.extend((0..100).map(|_| Scalar::random(&mut rng)));
    let mut points = vec![G1Affine::identity(), G1Affine::generator()];
    points.extend((0..20).map(|_| G1Projective::random(&mut rng).to_affine()));
    let scalar_buf = gpu.upload(&scalars).unwrap();
    let point_buf = gpu.upload(&points).unwrap();
    let mut scalar_words = gpu.alloc_zeros::<u64>(scalars.len() * 4).unwrap();
    let mut point_words = gpu.alloc_zeros::<u64>(points.len() * 12).unwrap();
    let n_scalar_words = scalar_words.len() as u32;
    let n_point_words = point_words.len() as u32;
    let scalar_grid = grid_1d(scalar_words.len(), 64).unwrap();
    let point_grid = grid_1d(point_words.len(), 64).unwrap();
    // SAFETY: cuzk_test_copy_u64(uint64_t* out, const uint64_t* in,
    // uint32_t n); a Scalar is 4 words and a G1Affine 12, so both buffers
    // of each launch hold n words, and the kernel checks i < n.
    unsafe {
        copy.args()
            .buf_mut(&mut scalar_words)
            .buf(&scalar_buf)
            .arg(&n_scalar_words)
            .launch(scalar_grid)
            .unwrap();
        copy.args()
            .buf_mut(&mut point_words)
            .buf(&point_buf)
            .arg(&n_point_words)
            .launch(point_grid)
            .unwrap();
    }
    assert_eq!(scalar_words.download().unwrap(), words(&scalars));
    assert_eq!(point_words.download().unwrap(), words(&points));
    assert_eq!(&words(&points)[..12], &[0; 12], "identity is all zeros");

    // A field element passed by value.
    let store = gpu.kernel_in(&TEST_MODULE, "cuzk_test_store_fr").unwrap();
    let s = Scalar::random(&mut rng);
    let mut limbs = gpu.alloc_zeros::<u64>(4).unwrap();
    // SAFETY: cuzk_test_store_fr(uint64_t* out, fr_t s) writes out[0..4]
    // from one thread; `limbs` holds 4 words.
    unsafe {
        store
            .args()
            .buf_mut(&mut limbs)
            .elem(&s)
            .launch(grid_1d(1, 32).unwrap())
            .unwrap();
    }
    assert_eq!(limbs.download().unwrap(), words(&[s]));
    gpu.synchronize().unwrap();
}

#[test]
fn gpu_missing_kernel_and_module_are_named() {
    let Some(gpu) = gpu("gpu_missing_kernel_and_module_are_named") else {
        return;
    };
    let err = gpu
        .kernel_in(&TEST_MODULE, "cuzk_test_no_such_kernel")
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Groth16Error::Cuda { .. }), "{text}");
    assert!(
        text.contains(&format!(
            "loading kernel cuzk_test::cuzk_test_no_such_kernel on GPU {}",
            gpu.ordinal()
        )),
        "{text}"
    );
    assert!(text.contains("CUDA_ERROR_NOT_FOUND"), "{text}");

    let err = gpu.kernel("no_such_module", "some_kernel").unwrap_err();
    assert!(
        matches!(&err, Groth16Error::UnknownModule { module, .. } if module == "no_such_module"),
        "{err}"
    );
    let err = gpu.load_module("no_such_module").unwrap_err().to_string();
    assert!(err.contains("\"no_such_module\""), "{err}");

    // Another module under a loaded module's name is refused.
    gpu.kernel_in(&TEST_MODULE, "cuzk_test_add_u32").unwrap();
    let impostor = DeviceModule::ptx("cuzk_test", ".version 7.0\n.target sm_80\n");
    let err = gpu
        .kernel_in(&impostor, "cuzk_test_add_u32")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a different module of that name is already loaded"),
        "{err}"
    );
}

#[test]
fn gpu_failed_launch_names_the_kernel() {
    let Some(gpu) = gpu("gpu_failed_launch_names_the_kernel") else {
        return;
    };
    let add = gpu.kernel_in(&TEST_MODULE, "cuzk_test_add_u32").unwrap();
    let input = gpu.upload(&[1u32, 2, 3]).unwrap();
    let mut out = gpu.alloc_zeros::<u32>(3).unwrap();
    let (one, n) = (1u32, 3u32);
    // More threads per block than any GPU allows: the driver refuses the
    // launch before anything runs.
    let too_big = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (4096, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the arguments match cuzk_test_add_u32 (see TEST_PTX); the
    // launch is refused anyway.
    let err = unsafe {
        add.args()
            .buf_mut(&mut out)
            .buf(&input)
            .arg(&one)
            .arg(&n)
            .launch(too_big)
    }
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!(
            "launching kernel cuzk_test::cuzk_test_add_u32 on GPU {} (grid (1, 1, 1), block \
             (4096, 1, 1)",
            gpu.ordinal()
        )),
        "{err}"
    );
    // The driver says CUDA_ERROR_INVALID_VALUE; any driver error will do.
    assert!(err.contains(": CUDA_ERROR_"), "{err}");
    eprintln!("as expected: {err}");

    // A refused launch leaves the GPU usable.
    // SAFETY: as above, with a valid configuration.
    unsafe {
        add.args()
            .buf_mut(&mut out)
            .buf(&input)
            .arg(&one)
            .arg(&n)
            .launch(grid_1d(3, 32).unwrap())
            .unwrap();
    }
    assert_eq!(out.download().unwrap(), [2, 3, 4]);
}

#[test]
fn gpu_embedded_modules_load() {
    let Some(gpu) = gpu("gpu_embedded_modules_load") else {
        return;
    };
    for module in modules::MODULES {
        let start = std::time::Instant::now();
        gpu.load_module(module.name)
            .unwrap_or_else(|e| panic!("{}: {e}", module.name));
        eprintln!(
            "module {} loaded in {:.1} ms",
            module.name,
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    eprintln!("{} embedded module(s) load", modules::MODULES.len());
    // The test-only modules load from the fatbins the tests embed.
    for module in [
        cuzk_groth16_cuda::fatbin_module!("arith"),
        cuzk_groth16_cuda::fatbin_module!("arith_bench"),
    ] {
        assert!(modules::TEST_ONLY.contains(&module.name));
        let err = gpu.load_module(module.name).unwrap_err();
        assert!(
            matches!(&err, Groth16Error::UnknownModule { .. }),
            "{}: {err}",
            module.name
        );
        // Any kernel of it; the module is loaded before the name is looked up.
        let err = gpu
            .kernel_in(&module, "cuzk_no_such_kernel")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CUDA_ERROR_NOT_FOUND"),
            "{}: {err}",
            module.name
        );
    }

    // Bytes that are not a fatbin are refused before the driver sees them.
    static NOT_A_FATBIN: [u8; 16] = [0; 16];
    let bogus = DeviceModule::fatbin("cuzk_not_a_fatbin", &NOT_A_FATBIN);
    let err = gpu.kernel_in(&bogus, "k").unwrap_err().to_string();
    assert!(err.contains("not a fatbin"), "{err}");
}
