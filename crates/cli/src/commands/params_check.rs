//! `cuzk params check [DIR]`: every parameter, verifying-key and metadata
//! file of a Filecoin parameter cache checked (cuzk_filecoin::params_check),
//! one verdict line per file, a progress bar while a file is read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use cuzk_filecoin::params_check::{self, DigestTable, Verdict};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

/// `cuzk params check`.
#[derive(Debug, clap::Args)]
pub struct ParamsCheckArgs {
    /// The parameter directory. Default: the Filecoin parameter cache,
    /// `FIL_PROOFS_PARAMETER_CACHE`, else /var/tmp/filecoin-proof-parameters.
    pub dir: Option<PathBuf>,
    /// For files filecoin-proofs does not list: also decode every point and
    /// check it is on the curve and in the prime-order subgroup (about 25 µs
    /// a point over the cores: minutes for a large set). Without it, only
    /// their section lengths and verifying keys are checked.
    #[arg(long)]
    pub full: bool,
    /// Check against this table (filecoin-proofs' parameters.json format)
    /// instead of the one filecoin-proofs publishes with the version cuzk
    /// is built with.
    #[arg(long, value_name = "FILE")]
    pub digests: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cuzk params check`: prints a verdict per file; an error (non-zero exit)
/// when any file is bad.
pub fn params_check(args: &ParamsCheckArgs) -> Result<()> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(cuzk_filecoin::params::default_dir);
    let own;
    let (table, table_name): (&DigestTable, String) = match &args.digests {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the digest table {}", path.display()))?;
            own = DigestTable::from_json(&text)
                .with_context(|| format!("digest table {}", path.display()))?;
            (&own, path.display().to_string())
        }
        None => (
            DigestTable::official()?,
            "filecoin-proofs' parameters.json".to_owned(),
        ),
    };
    let (files, ignored) = params_check::cache_files(&dir).map_err(|e| {
        let why = match &e {
            cuzk_filecoin::FilecoinError::Io { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        anyhow::anyhow!(
            "cannot list the parameter directory {}: {why}; give the directory, or set \
             FIL_PROOFS_PARAMETER_CACHE",
            dir.display()
        )
    })?;
    if !args.json {
        println!(
            "{} parameter files in {}, checked against {table_name} ({} digests)",
            files.len(),
            dir.display(),
            table.len()
        );
    }
    let mut results = Vec::with_capacity(files.len());
    for path in &files {
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        let bar = file_bar(path, size, args.json);
        let verdict = params_check::check_file(path, table, args.full, &mut |n| bar.inc(n));
        bar.finish_and_clear();
        if !args.json {
            println!("{}: {verdict}", name(path));
        }
        results.push((path, size, verdict));
    }
    let bad = results.iter().filter(|(_, _, v)| v.is_bad()).count();
    if args.json {
        println!(
            "{}",
            json!({
                "dir": dir,
                "digests": table_name,
                "files": results.iter().map(|(path, size, v)| file_json(path, *size, v)).collect::<Vec<_>>(),
                "ignored": ignored,
                "bad": bad,
            })
        );
    } else {
        if ignored > 0 {
            println!("{ignored} other entries ignored (not .params, .vk or .meta files)");
        }
        if files.is_empty() {
            println!("no parameter files to check in {}", dir.display());
        }
    }
    if bad > 0 {
        bail!(
            "{bad} of {} parameter files in {} are bad: replace them (fetch filecoin-proofs' \
             files again, or run `cuzk setup` again for parameters made here)",
            files.len(),
            dir.display()
        );
    }
    Ok(())
}

fn name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn file_json(path: &Path, size: u64, v: &Verdict) -> serde_json::Value {
    let mut j = json!({
        "file": name(path),
        "size": size,
        "verdict": v.code(),
        "bad": v.is_bad(),
        "detail": v.to_string(),
    });
    match v {
        Verdict::WrongDigest { expected, got } => {
            j["expected"] = json!(expected);
            j["got"] = json!(got);
        }
        Verdict::Truncated { needed, .. } => j["needed"] = json!(needed),
        _ => {}
    }
    j
}

/// A bar over one file's bytes on stderr (drawn only on a terminal, never
/// with `--json`).
fn file_bar(path: &Path, size: u64, json: bool) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(size),
        if json {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
    ) {
        bar.set_style(style);
    }
    bar.set_message(name(path));
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
