//! Circuit specs: the [`CircuitSpec`] a `family:size` string names, its
//! [`Family`], their ranges, parsing, printing and the [`SpecError`] that says
//! what is valid.

use std::fmt;
use std::str::FromStr;

/// A circuit shape: family + size. Parameters are made per shape; many
/// witnesses per shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CircuitSpec {
    pub family: Family,
    pub size: u32,
}

/// The built-in circuit families. What `size` means depends on the family;
/// see [`CircuitSpec::families`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    MulChain,
    Sha256,
    /// `bool_percent`: percent of rows that are boolean (0..=100).
    PorepShaped {
        bool_percent: u8,
    },
    NoAux,
    ManyInputs,
    RepeatedVars,
    ConstantOnly,
    Parts,
}

/// `porep:K` without `:P` means this many percent boolean rows, about what
/// Filecoin's PoRep has and what gives A/B/C ≈ 2.4/1.0/2.2 nonzeros per row.
pub const DEFAULT_BOOL_PERCENT: u8 = 50;

/// What `families()` prints, one entry per family, in `FromStr` syntax.
const FAMILIES: &[(&str, &str)] = &[
    (
        "mul-chain:K",
        "multiplication chain x' = x*(x + k), k constants, full-field values, public input \
         at both ends; exactly 2^K constraints (K in 3..=30)",
    ),
    (
        "sha256:N",
        "SHA-256 of an (N*64 - 9)-byte preimage, i.e. N blocks, digest packed into 2 public \
         inputs; boolean-heavy like Filecoin; 26704N-670 constraints (N in 1..=4096)",
    ),
    (
        "porep:K[:P]",
        "synthetic PoRep-shaped R1CS, P% boolean rows (default 50), about 2.4/1.0/2.2 \
         nonzeros per row in A/B/C at P=50, 4 public inputs; exactly 2^K constraints \
         (K in 5..=30, P in 0..=100)",
    ),
    (
        "no-aux:N",
        "N products x_i*x_(i+1) = y_i of public inputs, no aux variables at all; \
         3N+2 constraints (N in 1..=2^24)",
    ),
    (
        "many-inputs:N",
        "2^N public inputs, each squared into an aux, squares summed in one long row; \
         2^(N+1)+2 constraints (N in 0..=20)",
    ),
    (
        "repeated-vars:N",
        "N blocks of linear combinations that repeat a variable or cancel it to a zero \
         coefficient, incl. a variable with zero A and B density; 3N+3 constraints (N in 1..=2^24)",
    ),
    (
        "constant-only:N",
        "N blocks of rows holding only the ONE variable with constants, (3)*(5) = 15, mixed \
         with (x)*(2) = y; plus an empty and a B-and-C-empty row; 3N+3 constraints \
         (N in 1..=2^24)",
    ),
    (
        "parts:N",
        "N independent parts, synthesized in parallel and joined with `extend` on an \
         extensible constraint system (as WindowPoSt synthesizes its sectors), else one \
         after the other; a public input per part; 35N+1 constraints (N in 1..=4096)",
    ),
];

impl Family {
    /// The name used in spec strings.
    pub fn name(self) -> &'static str {
        match self {
            Family::MulChain => "mul-chain",
            Family::Sha256 => "sha256",
            Family::PorepShaped { .. } => "porep",
            Family::NoAux => "no-aux",
            Family::ManyInputs => "many-inputs",
            Family::RepeatedVars => "repeated-vars",
            Family::ConstantOnly => "constant-only",
            Family::Parts => "parts",
        }
    }

    /// Valid sizes. The upper bounds keep a typo from asking for terabytes;
    /// the lower bounds are what the construction needs (porep needs room for
    /// its 4 public inputs and 5 appended rows, mul-chain for its 4 fixed rows).
    pub fn size_range(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Family::MulChain => 3..=30,
            Family::Sha256 => 1..=4096,
            Family::PorepShaped { .. } => 5..=30,
            Family::ManyInputs => 0..=20,
            Family::Parts => 1..=4096,
            Family::NoAux | Family::RepeatedVars | Family::ConstantOnly => 1..=1 << 24,
        }
    }

    fn by_name(name: &str) -> Option<Family> {
        Some(match name {
            "mul-chain" => Family::MulChain,
            "sha256" => Family::Sha256,
            "porep" => Family::PorepShaped {
                bool_percent: DEFAULT_BOOL_PERCENT,
            },
            "no-aux" => Family::NoAux,
            "many-inputs" => Family::ManyInputs,
            "repeated-vars" => Family::RepeatedVars,
            "constant-only" => Family::ConstantOnly,
            "parts" => Family::Parts,
            _ => return None,
        })
    }
}

impl CircuitSpec {
    /// Families with a one-line description and the meaning of `size`, for
    /// `--help` output. The first string is the spec syntax, e.g. `porep:K[:P]`.
    pub fn families() -> &'static [(&'static str, &'static str)] {
        FAMILIES
    }

    /// Checks the size (and porep's percentage) against the family's range.
    pub fn validate(&self) -> Result<(), SpecError> {
        let range = self.family.size_range();
        if !range.contains(&self.size) {
            return Err(SpecError(format!(
                "{} size {} is out of range {}..={}; {}",
                self.family.name(),
                self.size,
                range.start(),
                range.end(),
                valid_specs()
            )));
        }
        if let Family::PorepShaped { bool_percent } = self.family
            && bool_percent > 100
        {
            return Err(SpecError(format!(
                "porep boolean percentage {bool_percent} is over 100; {}",
                valid_specs()
            )));
        }
        Ok(())
    }
}

/// Two small sizes per family, for exhaustive tests: each under ~2^12
/// constraints except sha256 (1 and 2 blocks: 26,034 and 52,738).
pub fn all_test_specs() -> Vec<CircuitSpec> {
    let spec = |family, size| CircuitSpec { family, size };
    vec![
        spec(Family::MulChain, 3),
        spec(Family::MulChain, 10),
        spec(Family::Sha256, 1),
        spec(Family::Sha256, 2),
        spec(Family::PorepShaped { bool_percent: 20 }, 7),
        spec(
            Family::PorepShaped {
                bool_percent: DEFAULT_BOOL_PERCENT,
            },
            12,
        ),
        spec(Family::NoAux, 1),
        spec(Family::NoAux, 16),
        spec(Family::ManyInputs, 0),
        spec(Family::ManyInputs, 8),
        spec(Family::RepeatedVars, 1),
        spec(Family::RepeatedVars, 8),
        spec(Family::ConstantOnly, 1),
        spec(Family::ConstantOnly, 8),
        spec(Family::Parts, 1),
        spec(Family::Parts, 8),
    ]
}

/// A spec string that does not parse, or a spec out of range. The message
/// says what is valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(String);

impl SpecError {
    pub fn message(&self) -> &str {
        &self.0
    }
}

fn valid_specs() -> String {
    let list: Vec<&str> = FAMILIES.iter().map(|(syntax, _)| *syntax).collect();
    format!("valid circuit specs: {}", list.join(", "))
}

impl FromStr for CircuitSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        let s = s.trim();
        let mut fields = s.split(':');
        // `split` always yields at least one field, possibly empty.
        let name = fields.next().unwrap_or_default();
        let Some(mut family) = Family::by_name(name) else {
            return Err(SpecError(format!(
                "unknown circuit family `{name}` in `{s}`; {}",
                valid_specs()
            )));
        };
        let Some(size) = fields.next() else {
            return Err(SpecError(format!("`{s}` has no size; {}", valid_specs())));
        };
        let size: u32 = size.parse().map_err(|_| {
            SpecError(format!(
                "size `{size}` in `{s}` is not a non-negative integer; {}",
                valid_specs()
            ))
        })?;
        if let Family::PorepShaped { bool_percent } = &mut family
            && let Some(p) = fields.next()
        {
            *bool_percent = p.parse().map_err(|_| {
                SpecError(format!(
                    "boolean percentage `{p}` in `{s}` is not an integer in 0..=100; {}",
                    valid_specs()
                ))
            })?;
        }
        if fields.next().is_some() {
            return Err(SpecError(format!(
                "`{s}` has too many `:` fields; {}",
                valid_specs()
            )));
        }
        let spec = CircuitSpec { family, size };
        spec.validate()?;
        Ok(spec)
    }
}

impl fmt::Display for CircuitSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.family.name(), self.size)?;
        match self.family {
            Family::PorepShaped { bool_percent } if bool_percent != DEFAULT_BOOL_PERCENT => {
                write!(f, ":{bool_percent}")
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use bellperson::Circuit;
    use bellperson::util_cs::test_cs::TestConstraintSystem;
    use blstrs::Scalar;

    use super::*;

    #[test]
    fn specs_round_trip_through_display_and_from_str() {
        let mut specs = all_test_specs();
        for p in [0, 1, 50, 99, 100] {
            specs.push(CircuitSpec {
                family: Family::PorepShaped { bool_percent: p },
                size: 20,
            });
        }
        for spec in specs {
            let text = spec.to_string();
            let back: CircuitSpec = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(back, spec, "{text}");
        }
        let parse = |s: &str| s.parse::<CircuitSpec>();
        assert_eq!(parse("porep:12:50"), parse("porep:12"));
        assert_eq!(
            parse("porep:12:50").map(|s| s.to_string()).as_deref(),
            Ok("porep:12")
        );
        assert_eq!(
            parse("porep:12:30").map(|s| s.to_string()).as_deref(),
            Ok("porep:12:30")
        );
        assert_eq!(
            parse(" mul-chain:10 "),
            Ok(CircuitSpec {
                family: Family::MulChain,
                size: 10
            })
        );
        for s in [
            "mul-chain:10",
            "sha256:1",
            "porep:12",
            "porep:12:50",
            "no-aux:4",
            "many-inputs:6",
            "repeated-vars:8",
            "constant-only:8",
        ] {
            assert!(parse(s).is_ok(), "{s}");
        }
    }

    #[test]
    fn bad_specs_are_refused_with_the_valid_list() {
        for s in [
            "",
            ":",
            "mul-chain",
            "mul-chain:",
            "mul-chain:x",
            "mul-chain:-1",
            "mul-chain:2",
            "mul-chain:31",
            "mul-chain:10:5",
            "Mul-Chain:10",
            "sha256:0",
            "sha256:1:2",
            "porep:4",
            "porep:12:101",
            "porep:12:-1",
            "porep:12:",
            "porep:12:50:1",
            "many-inputs:21",
            "no-aux:0",
            "repeated-vars:0",
            "constant-only:99999999999",
            "foo:3",
        ] {
            match s.parse::<CircuitSpec>() {
                Ok(spec) => panic!("`{s}` parsed as {spec:?}"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("valid circuit specs"), "{s}: {msg}");
                    assert!(msg.contains("porep:K[:P]"), "{s}: {msg}");
                }
            }
        }
    }

    #[test]
    fn families_list_matches_the_parser() {
        let names: Vec<&str> = CircuitSpec::families()
            .iter()
            .map(|(syntax, _)| syntax.split(':').next().unwrap_or_default())
            .collect();
        assert_eq!(names.len(), 8);
        for spec in all_test_specs() {
            assert!(names.contains(&spec.family.name()), "{spec}");
            let min = *spec.family.size_range().start();
            let text = format!("{}:{min}", spec.family.name());
            assert!(text.parse::<CircuitSpec>().is_ok(), "{text}");
        }
    }

    #[test]
    fn out_of_range_hand_made_spec_fails_to_synthesize() {
        for spec in [
            CircuitSpec {
                family: Family::MulChain,
                size: 2,
            },
            CircuitSpec {
                family: Family::PorepShaped { bool_percent: 101 },
                size: 8,
            },
            CircuitSpec {
                family: Family::PorepShaped { bool_percent: 50 },
                size: 4,
            },
            CircuitSpec {
                family: Family::Sha256,
                size: 0,
            },
            CircuitSpec {
                family: Family::ManyInputs,
                size: 40,
            },
        ] {
            assert!(spec.validate().is_err(), "{spec:?}");
            let mut cs = TestConstraintSystem::<Scalar>::new();
            assert!(spec.build(1).synthesize(&mut cs).is_err(), "{spec:?}");
        }
    }
}
