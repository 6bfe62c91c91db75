//! [`Profile`]: where a circuit's witness synthesis spends its time, by
//! namespace.
//!
//! [`Profile::of`] synthesizes a circuit on a witness-only system that also
//! follows the circuit's namespaces: the time between two namespace events
//! (and the values allocated meanwhile) is charged to the namespace path
//! open at the time, cut to its first `depth` components, with every run of
//! digits replaced by `#` (so `challenge_3/labeling/sha256` and
//! `challenge_7/...` add up). Building a namespace's name is not timed (the
//! witness system never builds names); reading the clock at every namespace
//! event is, so the profile's total exceeds the plain synthesis time and the
//! shares are what to read.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::{Result, WitnessCs};

/// One namespace path's share of a synthesis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileEntry {
    /// The path, cut to the profile's depth, digits as `#`; "" for the
    /// circuit's top level outside any namespace.
    pub path: String,
    /// Time spent with this path open (its deeper namespaces included).
    pub time: Duration,
    /// Values (inputs and aux) allocated meanwhile.
    pub values: u64,
}

/// Synthesis time by namespace path, the largest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub entries: Vec<ProfileEntry>,
    /// Wall time of the whole profiled synthesis.
    pub total: Duration,
}

impl Profile {
    /// Synthesizes `circuit` (with ONE allocated first, as everywhere) and
    /// returns where the time went, paths cut to `depth` components.
    pub fn of<C: Circuit<Scalar>>(circuit: C, depth: usize) -> Result<Profile> {
        let start = Instant::now();
        let mut cs = ProfileCs {
            inner: WitnessCs::default(),
            depth,
            open: Vec::new(),
            since: Instant::now(),
            values: 0,
            charged: HashMap::new(),
        };
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        cs.charge();
        let total = start.elapsed();
        let mut entries: Vec<ProfileEntry> = cs
            .charged
            .into_iter()
            .map(|(path, (time, values))| ProfileEntry { path, time, values })
            .collect();
        entries.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.path.cmp(&b.path)));
        Ok(Profile { entries, total })
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sum: Duration = self.entries.iter().map(|e| e.time).sum();
        writeln!(f, "profiled synthesis: {:.3?}", self.total)?;
        for e in &self.entries {
            let share = e.time.as_secs_f64() / sum.as_secs_f64().max(f64::MIN_POSITIVE);
            writeln!(
                f,
                "{:6.2}% {:>10.3?} {:>12} values  {}",
                100.0 * share,
                e.time,
                e.values,
                if e.path.is_empty() {
                    "(top level)"
                } else {
                    &e.path
                }
            )?;
        }
        Ok(())
    }
}

/// `name` with every run of ASCII digits replaced by `#`.
fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for ch in name.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(ch);
            in_digits = false;
        }
    }
    out
}

/// The witness system of [`Profile::of`].
struct ProfileCs {
    inner: WitnessCs,
    depth: usize,
    /// The namespaces open now, normalized.
    open: Vec<String>,
    /// When the current charge interval began.
    since: Instant,
    /// Values allocated in the current interval.
    values: u64,
    /// Path -> (time, values).
    charged: HashMap<String, (Duration, u64)>,
}

impl ProfileCs {
    /// Charges the interval since the last event to the open path.
    fn charge(&mut self) {
        let now = Instant::now();
        let cut = self.open.len().min(self.depth);
        let path = self.open[..cut].join("/");
        let e = self.charged.entry(path).or_default();
        e.0 += now - self.since;
        e.1 += self.values;
        self.values = 0;
        self.since = now;
    }
}

impl ConstraintSystem<Scalar> for ProfileCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, a: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.values += 1;
        self.inner.alloc(a, f)
    }

    fn alloc_input<F, A, AR>(&mut self, a: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.values += 1;
        self.inner.alloc_input(a, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, a: A, la: LA, lb: LB, lc: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.inner.enforce(a, la, lb, lc)
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        self.charge();
        if self.open.len() < self.depth {
            self.open.push(normalize(&name().into()));
        } else {
            // Deeper than the profile looks: only the depth matters.
            self.open.push(String::new());
        }
        self.since = Instant::now();
    }

    fn pop_namespace(&mut self) {
        self.charge();
        self.open.pop();
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocates 1 value at the top, 2 in each of `outer_#` x 3, and inside
    /// each of those 4 in `inner`.
    struct Nested;

    impl Circuit<Scalar> for Nested {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            cs.alloc(|| "top", || Ok(Scalar::ONE))?;
            for i in 0..3 {
                let mut cs = cs.namespace(|| format!("outer_{i}"));
                for _ in 0..2 {
                    cs.alloc(|| "v", || Ok(Scalar::ONE))?;
                }
                let mut cs = cs.namespace(|| "inner");
                for _ in 0..4 {
                    cs.alloc(|| "w", || Ok(Scalar::ONE))?;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn values_are_charged_to_the_open_path_cut_to_the_depth() {
        let values = |p: &Profile| {
            let mut v: Vec<(String, u64)> = p
                .entries
                .iter()
                .map(|e| (e.path.clone(), e.values))
                .collect();
            v.sort();
            v
        };
        let deep = Profile::of(Nested, 2).unwrap();
        assert_eq!(
            values(&deep),
            [
                (String::new(), 2), // ONE and "top"
                ("outer_#".into(), 6),
                ("outer_#/inner".into(), 12),
            ]
        );
        let flat = Profile::of(Nested, 1).unwrap();
        assert_eq!(values(&flat), [(String::new(), 2), ("outer_#".into(), 18)]);
        let sum: Duration = deep.entries.iter().map(|e| e.time).sum();
        assert!(sum <= deep.total);
        assert!(deep.to_string().contains("outer_#/inner"));
        assert_eq!(normalize("a12b3"), "a#b#");
    }
}
