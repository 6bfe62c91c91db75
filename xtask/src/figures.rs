//! `cargo xtask figures`: every figure the README quotes beside a bench-data
//! file is in that file.
//!
//! A *block* of a Markdown file is a paragraph, a list item or a table row.
//! In a block that names one or more `bench-data/....json` files, each
//! figure with a unit (`0.458 s`, `130.2 ms`, `68.8 GiB`, `85x`) must be a
//! value of one of those files at the precision it is quoted with: seconds
//! and milliseconds against any number of the file (a median, min, max or
//! derived rate; ms as thousandths of a second), GiB against any number,
//! and `Nx` against the files' `ratio_vs_baseline` values. Numbers without a
//! unit (sizes, core counts) are not figures. So a README paragraph that
//! quotes a measurement must name the file it comes from, and a figure
//! edited without a new run fails CI (`cargo test -p xtask`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// A figure as the text quotes it.
#[derive(Debug, Clone, PartialEq)]
struct Figure {
    text: String,
    value: f64,
    decimals: i32,
    unit: Unit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
    GiB,
    Ratio,
}

/// Checks `markdown` (read from `name`) against the bench-data files under
/// `root`; returns how many figures were checked, or every figure that was
/// not found.
pub fn check(markdown: &str, name: &str, root: &Path) -> Result<usize> {
    let mut checked = 0;
    let mut missing = Vec::new();
    for block in blocks(markdown) {
        let files = bench_files(&block);
        if files.is_empty() {
            continue;
        }
        let mut numbers = Vec::new();
        let mut ratios = Vec::new();
        for file in &files {
            let path = root.join(file);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("{name} names {file}, which cannot be read"))?;
            let json: Value = serde_json::from_str(&text)
                .with_context(|| format!("{file} (named in {name}) is not JSON"))?;
            collect(&json, None, &mut numbers, &mut ratios);
        }
        for figure in figures(&block) {
            checked += 1;
            let candidates = match figure.unit {
                Unit::Ratio => &ratios,
                _ => &numbers,
            };
            if !candidates.iter().any(|n| matches(&figure, *n)) {
                missing.push(format!(
                    "{:?} is in none of {} (in: {})",
                    figure.text,
                    files.join(", "),
                    one_line(&block)
                ));
            }
        }
    }
    if !missing.is_empty() {
        bail!(
            "{name} quotes {} figure(s) its bench-data files do not hold:\n  {}",
            missing.len(),
            missing.join("\n  ")
        );
    }
    Ok(checked)
}

/// Paragraphs, list items and table rows, each as one string; fenced code
/// is skipped.
fn blocks(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut fenced = false;
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if !current.trim().is_empty() {
            out.push(std::mem::take(current));
        }
        current.clear();
    };
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            flush(&mut current, &mut out);
            continue;
        }
        if fenced {
            continue;
        }
        let starts_item = trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed.starts_with('|')
            || trimmed.starts_with('#');
        if trimmed.is_empty() || starts_item {
            flush(&mut current, &mut out);
        }
        current.push_str(line);
        current.push('\n');
        if trimmed.starts_with('|') || trimmed.starts_with('#') {
            flush(&mut current, &mut out);
        }
    }
    flush(&mut current, &mut out);
    out
}

/// The `bench-data/...json` paths a block names.
fn bench_files(block: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut rest = block;
    while let Some(at) = rest.find("bench-data/") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '`' | ')' | ',' | ';' | '|'))
            .unwrap_or(tail.len());
        let path = tail[..end].trim_end_matches(['.', ':']);
        if path.ends_with(".json") && !files.iter().any(|f| f == path) {
            files.push(path.to_owned());
        }
        rest = &tail[end..];
    }
    files
}

/// The figures with a unit in a block (paths and code spans excluded).
fn figures(block: &str) -> Vec<Figure> {
    // Code spans and file names hold digits that are not figures.
    let mut text = String::new();
    let mut in_code = false;
    for c in block.chars() {
        if c == '`' {
            in_code = !in_code;
            text.push(' ');
        } else {
            text.push(if in_code { ' ' } else { c });
        }
    }
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '|' | '(' | ')' | ',' | ';'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if word.contains('/') {
            continue;
        }
        // "0.458 s", "130 ms", "68.8 GiB" (unit as the next word), "85x".
        let (number, unit) = if let Some(n) = word.strip_suffix('x') {
            (n, Some(Unit::Ratio))
        } else {
            let next = words
                .get(i + 1)
                .map(|w| w.trim_end_matches(['.', ':']))
                .unwrap_or("");
            let unit = match next {
                "s" => Some(Unit::Seconds),
                "ms" => Some(Unit::Millis),
                "GiB" => Some(Unit::GiB),
                _ => None,
            };
            (*word, unit)
        };
        let Some(unit) = unit else { continue };
        let number = number.trim_start_matches(['~', '≈']);
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
            continue;
        }
        let Ok(value) = number.parse::<f64>() else {
            continue;
        };
        let decimals = number.split_once('.').map_or(0, |(_, d)| d.len() as i32);
        if unit == Unit::GiB && decimals == 0 {
            // A size (a 32 GiB sector, a 16 GiB card), not a measurement.
            continue;
        }
        let text = match unit {
            Unit::Ratio => (*word).to_owned(),
            _ => format!("{word} {}", words[i + 1].trim_end_matches(['.', ':'])),
        };
        out.push(Figure {
            text,
            value,
            decimals,
            unit,
        });
    }
    out
}

/// Every number of a JSON document, and apart the `ratio_vs_baseline` ones.
fn collect(v: &Value, key: Option<&str>, numbers: &mut Vec<f64>, ratios: &mut Vec<f64>) {
    match v {
        Value::Number(n) => {
            if let Some(n) = n.as_f64() {
                numbers.push(n);
                if key == Some("ratio_vs_baseline") {
                    ratios.push(n);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect(i, key, numbers, ratios)),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, i)| collect(i, Some(k), numbers, ratios)),
        _ => {}
    }
}

/// Whether `n` (seconds for s and ms) reads as `figure` at its precision.
fn matches(figure: &Figure, n: f64) -> bool {
    let n = match figure.unit {
        Unit::Millis => n * 1e3,
        _ => n,
    };
    let half_ulp = 0.5 * 10f64.powi(-figure.decimals);
    (n - figure.value).abs() <= half_ulp * (1.0 + 1e-9)
}

fn one_line(block: &str) -> String {
    let s: String = block.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 120 {
        format!("{}...", s.chars().take(117).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    const RUN: &str = r#"{"results": [
        {"name": "prover/2^24", "median": 0.458480813, "min": 0.4518},
        {"name": "msm/h", "median": 0.130228729, "ratio_vs_baseline": 84.50213},
        {"name": "peak_rss", "median": 68.84}]}"#;

    #[test]
    fn figures_found_at_their_precision_pass() {
        let root = root_with(&[("bench-data/prover/run.json", RUN)]);
        let md = "# Measured\n\nA proof takes 0.458 s (0.46 s rounded, min 0.452 s), MSM H\n\
                  130.2 ms, 85x bellperson, 68.8 GiB of RSS\n\
                  (`bench-data/prover/run.json`, `proof_bench --sizes 24`).\n\n\
                  Unrelated: 12.5 s without a file is not checked.\n";
        assert_eq!(check(md, "README", root.path()).unwrap(), 6);
    }

    #[test]
    fn a_figure_not_in_the_file_fails_and_is_named() {
        let root = root_with(&[("bench-data/prover/run.json", RUN)]);
        for (quoted, bad) in [
            ("0.459 s", "\"0.459 s\""),
            ("131 ms", "\"131 ms\""),
            ("84x", "\"84x\""),
            ("68.9 GiB", "\"68.9 GiB\""),
        ] {
            let md = format!("Took {quoted} (bench-data/prover/run.json).\n");
            let err = check(&md, "README", root.path()).unwrap_err().to_string();
            assert!(err.contains(bad), "{quoted}: {err}");
        }
        // A ratio is only a ratio_vs_baseline value, not any number.
        let md = "Took 68.84x (bench-data/prover/run.json).\n";
        assert!(check(md, "README", root.path()).is_err());
    }

    #[test]
    fn a_missing_file_fails() {
        let root = root_with(&[]);
        let md = "| 2^24 | 0.458 s | bench-data/prover/gone.json |\n";
        let err = format!("{:#}", check(md, "README", root.path()).unwrap_err());
        assert!(err.contains("bench-data/prover/gone.json"), "{err}");
    }

    #[test]
    fn table_rows_and_list_items_are_blocks_of_their_own() {
        let root = root_with(&[("bench-data/a.json", RUN)]);
        // The second row names no file: its figure is not checked; the
        // first row's figure is checked against its own file only.
        let md = "| x | 0.458 s | bench-data/a.json |\n| y | 9.99 s | none |\n\
                  - one 0.458 s bench-data/a.json\n- two 7.77 s\n";
        assert_eq!(check(md, "README", root.path()).unwrap(), 2);
        let md = "| x | 9.99 s | bench-data/a.json |\n";
        assert!(check(md, "README", root.path()).is_err());
    }

    #[test]
    fn code_paths_and_sizes_are_not_figures() {
        let block = "`--sizes 24 s` 2^24 16 cores 32 GiB bench-data/x-1.5.json 3 s";
        let f = figures(block);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].value, 3.0);
    }

    /// The README of this repository.
    #[test]
    fn the_readme_quotes_only_figures_its_bench_data_holds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let checked = check(&readme, "README.md", root).unwrap();
        assert!(checked >= 10, "only {checked} figures checked in README.md");
    }
}
