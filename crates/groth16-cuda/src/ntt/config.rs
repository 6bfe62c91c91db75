//! The NTT's tuning, as plain data: the pass kernel variants, how large a
//! plan's tables may be and the stage order of a pass, gathered in
//! [`NttConfig`].

use super::plan::{self, MAX_LOG2, MAX_SINGLE_TABLE_LOG};
#[cfg(doc)]
use super::{GpuNtt, plan::DomainPlan};

/// How large a plan's tables may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLayout {
    /// Factor tables of up to 2^factor_single_log entries are read with one
    /// lookup; larger ones are split in two (one multiplication an element
    /// more). A pass's factor table has 2^hi entries (hi: one past its top
    /// bit).
    pub factor_single_log: u32,
    /// H's coset scaling and final scaling from whole tables of 2^log2
    /// entries (one multiplication an element fewer each) instead of split
    /// pairs of about 2^(log2/2).
    pub whole_scales: bool,
}

impl TableLayout {
    /// Every table within 2^18 entries (8 MiB): the default.
    pub const SMALL: TableLayout = TableLayout {
        factor_single_log: MAX_SINGLE_TABLE_LOG,
        whole_scales: false,
    };
    /// Every table whole: at 2^26 the top pass's factor and H's two scalings
    /// are three tables of 2^26 entries (6 GiB), and H does 11 * 2^26
    /// multiplications fewer (one an element in each of its seven top passes,
    /// its three coset scalings and its final scaling). From 2^28 up a middle
    /// pass's factor table is whole too.
    pub const WHOLE: TableLayout = TableLayout {
        factor_single_log: MAX_LOG2,
        whole_scales: true,
    };
    /// Factor tables whole, H's scalings split: 2^log2 entries more than
    /// [`TableLayout::SMALL`] at 2^19-2^27 (the top pass's table), one
    /// multiplication an element fewer in each top pass.
    pub const WHOLE_FACTORS: TableLayout = TableLayout {
        factor_single_log: MAX_LOG2,
        whole_scales: false,
    };
    /// H's two scalings whole, factor tables split: 2 x 2^log2 entries
    /// more than [`TableLayout::SMALL`].
    pub const WHOLE_SCALES: TableLayout = TableLayout {
        factor_single_log: MAX_SINGLE_TABLE_LOG,
        whole_scales: true,
    };
}

impl Default for TableLayout {
    fn default() -> Self {
        TableLayout::SMALL
    }
}

/// How a pass runs its radix-2 stages in shared memory: one stage per round
/// trip (`ntt_stage`), or two (`ntt_stage_pair`: the same butterflies on a
/// quad of rows in registers, with a lone stage 0 when the pass has an odd
/// number of bits). Both give the same values; [`DomainPlan::run_on_cpu_with`]
/// follows either's index arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stages {
    Radix2,
    /// Stage pairs, at stages 1-3 numbered j first where
    /// [`super::plan::j_major`] allows (the kernels with swizzled slots).
    Radix4,
    /// Stage pairs in the usual quad order (the kernel without the
    /// swizzle, kept to measure against).
    Radix4Plain,
}

/// The pass kernel variants of `kernels/ntt.cu` (`NTT_PASS_KERNELS`): how
/// the stages run ([`Stages`]), threads per block, and the blocks per SM
/// the register allocation must allow. All give the same values; they
/// differ in speed, chosen by measurement (`examples/ntt_bench.rs` times
/// each beside the default in one run). The default, stage pairs at 128
/// threads, measured fastest on an H200 in every table layout at 2^24 and
/// 2^26 (bench-data/ntt/2026-12-05-65c4aed-pass-variants.json: H at 2^26
/// 155.8 ms against radix-2's 175.0, both with the fused bit-reversal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PassKernel {
    /// Radix-2 stages, 256 threads (74-78 registers, 3 blocks per SM).
    Radix2,
    /// Radix-2 stages, 128 threads held to 6 blocks per SM (70-72 registers).
    Radix2T128,
    /// Radix-2 stages, 256 threads held to 64 registers (4 blocks per SM;
    /// a few spilled words).
    Radix2T256B4,
    /// Stage pairs, 256 threads (78-88 registers).
    Radix4,
    /// Stage pairs, 256 threads held to 3 blocks per SM (77-78 registers).
    Radix4T256B3,
    /// Stage pairs, 128 threads held to 6 blocks per SM (77-80 registers).
    #[default]
    Radix4T128B6,
    /// [`PassKernel::Radix4T128B6`] without the swizzled shared-memory
    /// slots and j-first pairs: the default before them, to measure against.
    Radix4T128B6Plain,
    /// Stage pairs, 256 threads held to 64 registers (4 blocks per SM;
    /// a few spilled words).
    Radix4T256B4,
}

impl PassKernel {
    /// Every variant, the default first.
    pub const ALL: [PassKernel; 8] = [
        PassKernel::Radix4T128B6,
        PassKernel::Radix4T128B6Plain,
        PassKernel::Radix2,
        PassKernel::Radix2T128,
        PassKernel::Radix2T256B4,
        PassKernel::Radix4,
        PassKernel::Radix4T256B3,
        PassKernel::Radix4T256B4,
    ];

    /// The suffix of its entry points, `ntt_{dif,dit}_pass<suffix>_bls12_381`.
    pub fn suffix(self) -> &'static str {
        match self {
            PassKernel::Radix2 => "",
            PassKernel::Radix2T128 => "_r2_t128",
            PassKernel::Radix2T256B4 => "_r2_t256_b4",
            PassKernel::Radix4 => "_r4_t256",
            PassKernel::Radix4T256B3 => "_r4_t256_b3",
            PassKernel::Radix4T128B6 => "_r4_t128_b6",
            PassKernel::Radix4T128B6Plain => "_r4_t128_b6_plain",
            PassKernel::Radix4T256B4 => "_r4_t256_b4",
        }
    }

    /// Threads per block it is compiled for.
    pub fn threads(self) -> u32 {
        match self {
            PassKernel::Radix2T128 | PassKernel::Radix4T128B6 | PassKernel::Radix4T128B6Plain => {
                128
            }
            _ => plan::THREADS,
        }
    }

    /// How it runs the stages.
    pub fn stages(self) -> Stages {
        match self {
            PassKernel::Radix2 | PassKernel::Radix2T128 | PassKernel::Radix2T256B4 => {
                Stages::Radix2
            }
            PassKernel::Radix4T128B6Plain => Stages::Radix4Plain,
            _ => Stages::Radix4,
        }
    }

    /// The entry point of a DIT (`dit`) or DIF pass.
    pub fn entry_point(self, dit: bool) -> String {
        let dir = if dit { "dit" } else { "dif" };
        format!("ntt_{dir}_pass{}_bls12_381", self.suffix())
    }
}

/// Tuning of [`GpuNtt`]; [`NttConfig::default`] is what the prover uses:
/// stage pairs at 128 threads, small tables, the fused final bit-reversal
/// (each measured faster than the alternative on an H200, none costing
/// memory). Whole tables are the caller's choice ([`GpuOptions::ntt`]).
///
/// [`GpuOptions::ntt`]: crate::GpuOptions::ntt
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttConfig {
    /// The pass kernel variant.
    pub pass_kernel: PassKernel,
    /// How large the tables may be ([`TableLayout`]): the default keeps
    /// every table within 8 MiB; [`TableLayout::WHOLE`] saves H about 10%
    /// of its multiplications for three tables of 32 * 2^log2 bytes (6 GiB
    /// at 2^26). A `GpuNtt` keeps the tables of every domain size it has
    /// run for its lifetime.
    pub tables: TableLayout,
    /// H's final bit-reversal done by the last pass of its last inverse
    /// transform, writing natural order into the second vector (one launch
    /// and one read and write of the vector fewer;
    /// [`DomainPlan::with_fused_bitrev`]); the entry points hand back the
    /// buffers so that h is where their callers expect it.
    pub fused_bitrev: bool,
}

impl Default for NttConfig {
    fn default() -> Self {
        NttConfig {
            pass_kernel: PassKernel::default(),
            tables: TableLayout::default(),
            fused_bitrev: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant's suffix, threads and stages are those the module
    /// instantiates (`NTT_PASS_KERNELS(suffix, r4, sw, threads, min_blocks)` in
    /// kernels/ntt.cu), and no instantiation lacks a variant.
    #[test]
    fn pass_kernels_match_the_module() {
        let source = include_str!("../../../../kernels/ntt.cu");
        let lines: Vec<Vec<&str>> = source
            .lines()
            .filter_map(|l| l.strip_prefix("NTT_PASS_KERNELS("))
            .map(|l| l.trim_end_matches(')').split(',').map(str::trim).collect())
            .collect();
        assert_eq!(lines.len(), PassKernel::ALL.len(), "{lines:?}");
        for k in PassKernel::ALL {
            let line = lines
                .iter()
                .find(|l| l[0] == k.suffix())
                .unwrap_or_else(|| panic!("{k:?}: no NTT_PASS_KERNELS({}, ...)", k.suffix()));
            assert_eq!(line[1] == "true", k.stages() != Stages::Radix2, "{k:?}");
            assert_eq!(line[2] == "true", k.stages() == Stages::Radix4, "{k:?}");
            assert_eq!(line[3], k.threads().to_string(), "{k:?}");
        }
        // The names the macro makes are those entry_point gives.
        for dir in ["dif", "dit"] {
            let made = format!("ntt_{dir}_pass##SUFFIX##_bls12_381(");
            assert!(
                source.contains(&made),
                "kernels/ntt.cu no longer makes {made}"
            );
        }
        assert_eq!(
            PassKernel::Radix4.entry_point(true),
            "ntt_dit_pass_r4_t256_bls12_381"
        );
        assert_eq!(PassKernel::ALL[0], PassKernel::default());
        assert_eq!(
            PassKernel::default().entry_point(false),
            "ntt_dif_pass_r4_t128_b6_bls12_381"
        );
        assert_eq!(
            PassKernel::Radix2.entry_point(false),
            "ntt_dif_pass_bls12_381"
        );
        // The prover's default: stage pairs, small tables, the fused
        // bit-reversal (all measured faster; none costs memory).
        let d = NttConfig::default();
        assert_eq!(d.pass_kernel, PassKernel::Radix4T128B6);
        assert_eq!(d.tables, TableLayout::SMALL);
        assert!(d.fused_bitrev);
    }
}
