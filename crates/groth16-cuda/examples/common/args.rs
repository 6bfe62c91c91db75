//! Command-line pieces the benchmark examples share, for their clap parsers
//! (`#[path]`-included, not an example itself): the revision and command
//! line a bench-data file records, `--json REV CMD`, and comma-separated
//! lists. Each includer uses part of it.
#![allow(dead_code)]

use std::fmt::Display;
use std::ops::Deref;
use std::str::FromStr;

/// The revision and command line that open the command line of a program
/// writing a bench-data file, both required.
#[derive(Debug, clap::Args)]
pub struct Record {
    /// Short git revision, written to the JSON's "revision".
    pub revision: String,
    /// The command line that ran this, written to the JSON's "command".
    pub command: String,
}

/// The same two positional arguments, either of which may be left out.
#[derive(Debug, clap::Args)]
pub struct OptionalRecord {
    /// Short git revision, written to the JSON's "revision".
    pub revision: Option<String>,
    /// The command line that ran this, written to the JSON's "command".
    pub command: Option<String>,
}

impl OptionalRecord {
    /// The revision given, or "unknown".
    pub fn revision_or_unknown(&self) -> String {
        self.revision.clone().unwrap_or_else(|| "unknown".into())
    }

    /// The command line given, or this process's own arguments joined by
    /// spaces.
    pub fn command_or_argv(&self) -> String {
        self.command
            .clone()
            .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" "))
    }
}

/// `--json REV CMD`: a bench-data JSON printed at the end.
#[derive(Debug, clap::Args)]
pub struct JsonRecord {
    /// Print a bench-data JSON to stdout at the end, with this revision and
    /// command line.
    #[arg(
        long = "json",
        num_args = 2,
        value_names = ["REV", "CMD"],
        allow_hyphen_values = true,
        action = clap::ArgAction::Set
    )]
    values: Option<Vec<String>>,
}

impl JsonRecord {
    /// The revision and command line, when `--json` was given.
    pub fn get(&self) -> Option<(&str, &str)> {
        match self.values.as_deref() {
            Some([revision, command]) => Some((revision, command)),
            _ => None,
        }
    }
}

/// A comma-separated list (`20,22,24`), each item trimmed and parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

impl<T: FromStr> FromStr for List<T>
where
    T::Err: Display,
{
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(|item| {
                let item = item.trim();
                item.parse()
                    .map_err(|e| format!("{item:?} in a comma-separated list: {e}"))
            })
            .collect::<Result<_, _>>()
            .map(List)
    }
}

impl<T> Deref for List<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<'a, T> IntoIterator for &'a List<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
