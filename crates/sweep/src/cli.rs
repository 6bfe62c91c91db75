//! The command line: `cuzk-sweep run ...` and `cuzk-sweep plot JSON...`.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use cuzk_engine::bench::ParamsSource;
use cuzk_engine::bench::grid::Grid;
use cuzk_synth::circuits::CircuitSpec;

use crate::report::SweepDoc;
use crate::run::{Plan, revision};

#[derive(Debug, Parser)]
#[command(
    name = "cuzk-sweep",
    about = "Engine throughput over a grid of settings and circuit sizes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a sweep and write <date>-<rev>[-<label>].{json,csv} and one SVG
    /// per swept key into --out.
    #[command(args_override_self = true)]
    Run(RunArgs),
    /// Redraw the SVGs of saved sweep JSON files (beside each file, or into
    /// --out).
    Plot {
        /// cuzk-sweep JSON documents.
        #[arg(required = true, value_name = "JSON")]
        files: Vec<PathBuf>,
        /// Where the SVGs go [default: beside each JSON file].
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Circuits, comma-separated or repeated, e.g. porep:20,porep:22
    /// (`cuzk circuits` lists the families).
    #[arg(
        long = "circuit",
        value_delimiter = ',',
        required = true,
        value_name = "SPEC"
    )]
    pub circuits: Vec<String>,
    /// Partitions per measured job.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub partitions: usize,
    /// Measured jobs per circuit and grid point (after one warm-up
    /// partition on a fresh engine).
    #[arg(long, default_value_t = 3, value_name = "R")]
    pub repeats: usize,
    /// A swept engine setting, `key=v1,v2,...` (any key of
    /// docs/engine.example.toml; commas inside [..] or quotes stay in one
    /// value); repeat for more keys: every combination runs.
    #[arg(long = "grid", value_name = "KEY=V1,V2")]
    pub grid: Vec<String>,
    /// An engine setting for every point, `key=value`, applied before the
    /// grid's (e.g. backend=gpu).
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    pub engine: Vec<String>,
    /// Fake parameters made in memory (the prover's real work, proofs that
    /// do not verify): for timing at any size.
    #[arg(long, conflicts_with = "params")]
    pub fake_params: bool,
    /// A parameter file for one circuit, SPEC=FILE (repeat per circuit).
    /// Without --fake-params or --params, parameters are generated with
    /// bellperson (fine up to about 2^12 constraints).
    #[arg(long = "params", value_name = "SPEC=FILE")]
    pub params: Vec<String>,
    /// Output folder (created if missing).
    #[arg(long, default_value = "sweep-out", value_name = "DIR")]
    pub out: PathBuf,
    /// The git revision to record [default: a REV file here or beside the
    /// executable, else git, else `unknown`].
    #[arg(long, value_name = "REV")]
    pub rev: Option<String>,
    /// Appended to the file names: <date>-<rev>-<label>.
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// Also write the Chrome trace of each point's median repeat into
    /// <stem>-timelines/ (opens in Perfetto).
    #[arg(long)]
    pub timelines: bool,
}

impl RunArgs {
    /// The checked plan, with `command` recorded as the command line.
    pub fn plan(&self, command: String) -> Result<Plan> {
        let circuits: Vec<CircuitSpec> = self
            .circuits
            .iter()
            .map(|c| {
                c.trim()
                    .parse::<CircuitSpec>()
                    .with_context(|| format!("--circuit {c}"))
            })
            .collect::<Result<_>>()?;
        let mut files: Vec<(CircuitSpec, PathBuf)> = Vec::new();
        for entry in &self.params {
            let Some((spec, file)) = entry.split_once('=') else {
                bail!("--params {entry}: expected SPEC=FILE, e.g. porep:22=porep-22.params");
            };
            let spec: CircuitSpec = spec
                .trim()
                .parse()
                .with_context(|| format!("--params {entry}"))?;
            files.push((spec, PathBuf::from(file.trim())));
        }
        let params = circuits
            .iter()
            .map(|c| {
                if self.fake_params {
                    return Ok(ParamsSource::Fake);
                }
                match files.iter().find(|(s, _)| s == c) {
                    Some((_, f)) => Ok(ParamsSource::File(f.clone())),
                    None if files.is_empty() => Ok(ParamsSource::Generate),
                    None => bail!("--params names no file for {c}; give one SPEC=FILE per circuit"),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        for (spec, _) in &files {
            if !circuits.contains(spec) {
                bail!("--params names {spec}, which is not among the --circuit values");
            }
        }
        let plan = Plan {
            circuits,
            partitions: self.partitions,
            repeats: self.repeats,
            grid: Grid::parse(&self.grid)?,
            engine: self.engine.clone(),
            params,
            out: self.out.clone(),
            revision: revision(self.rev.as_deref()),
            label: self.label.clone(),
            command,
            timelines: self.timelines,
        };
        plan.check()?;
        Ok(plan)
    }
}

/// Runs the command line `args` (the program name first).
pub fn main_with<I, T>(args: I) -> Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let command = shell_words(&args);
    let cli = Cli::try_parse_from(&args).map_err(|e| {
        // --help and --version are not failures.
        if !e.use_stderr() {
            let _ = e.print();
            std::process::exit(0);
        }
        anyhow::anyhow!("{e}")
    })?;
    match cli.command {
        Command::Run(run) => {
            let plan = run.plan(command)?;
            let written = crate::run::run(&plan)?;
            eprintln!("wrote {}", written.json.display());
            eprintln!("wrote {}", written.csv.display());
            for svg in &written.svgs {
                eprintln!("wrote {}", svg.display());
            }
            let failures = &written.doc.failures;
            if !failures.is_empty() {
                let list: Vec<String> = failures
                    .iter()
                    .map(|f| format!("{} at {}: {}", f.circuit, f.settings, f.error))
                    .collect();
                bail!(
                    "{} of {} points failed (the others are in the files above):\n  {}",
                    failures.len(),
                    failures.len() + written.doc.results.len(),
                    list.join("\n  ")
                );
            }
            Ok(())
        }
        Command::Plot { files, out } => {
            for file in files {
                let doc = SweepDoc::read(&file)?;
                let dir = match &out {
                    Some(d) => d.clone(),
                    None => file
                        .parent()
                        .map(PathBuf::from)
                        .unwrap_or_else(|| PathBuf::from(".")),
                };
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let stem = file
                    .file_stem()
                    .with_context(|| format!("{} has no file name", file.display()))?
                    .to_string_lossy()
                    .into_owned();
                for svg in crate::plot::draw(&doc, &dir, &stem)? {
                    eprintln!("wrote {}", svg.display());
                }
            }
            Ok(())
        }
    }
}

/// The arguments as one line a shell would split back into them.
fn shell_words(args: &[OsString]) -> String {
    args.iter()
        .map(|a| {
            let a = a.to_string_lossy();
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/+@%".contains(c));
            if plain {
                a.into_owned()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(line: &[&str]) -> Result<RunArgs> {
        let cli = Cli::try_parse_from(["cuzk-sweep", "run"].iter().chain(line))?;
        match cli.command {
            Command::Run(r) => Ok(r),
            Command::Plot { .. } => bail!("not run"),
        }
    }

    #[test]
    fn a_command_line_becomes_a_plan() {
        let args = run_args(&[
            "--circuit",
            "porep:20,porep:22",
            "--partitions",
            "4",
            "--grid",
            "workers_per_device=1,2,3",
            "--grid",
            "synthesis_concurrency=2,4",
            "--engine",
            "backend=cpu",
            "--fake-params",
            "--out",
            "first",
            "--out",
            "second",
            "--rev",
            "abc1234",
        ])
        .unwrap();
        let plan = args.plan("cmd".into()).unwrap();
        assert_eq!(plan.circuits.len(), 2);
        assert_eq!(plan.partitions, 4);
        assert_eq!(plan.repeats, 3);
        assert_eq!(plan.grid.points().len(), 6);
        assert_eq!(plan.params, [ParamsSource::Fake, ParamsSource::Fake]);
        assert_eq!(plan.out, PathBuf::from("second"), "the last --out wins");
        assert_eq!(plan.revision, "abc1234");

        let plan = run_args(&["--circuit", "porep:8", "--circuit", "mul-chain:6"])
            .unwrap()
            .plan("cmd".into())
            .unwrap();
        assert_eq!(
            plan.params,
            [ParamsSource::Generate, ParamsSource::Generate]
        );
        assert_eq!(plan.grid.points().len(), 1);

        let plan = run_args(&["--circuit", "porep:8", "--params", "porep:8=p8.params"])
            .unwrap()
            .plan("cmd".into())
            .unwrap();
        assert_eq!(plan.params, [ParamsSource::File("p8.params".into())]);
    }

    #[test]
    fn mistakes_are_named() {
        let err = |line: &[&str]| match run_args(line) {
            Ok(a) => format!("{:#}", a.plan("cmd".into()).unwrap_err()),
            Err(e) => format!("{e:#}"),
        };
        assert!(err(&["--circuit", "porep:99"]).contains("out of range"));
        assert!(err(&["--circuit", "porep:8", "--grid", "nope=1,2"]).contains("nope"));
        assert!(err(&["--circuit", "porep:8", "--grid", "workers_per_device"]).contains("no `=`"));
        assert!(err(&["--circuit", "porep:8", "--repeats", "0"]).contains("--repeats"));
        assert!(err(&["--circuit", "porep:8", "--engine", "backend=tpu"]).contains("tpu"));
        assert!(
            err(&["--circuit", "porep:8,porep:9", "--params", "porep:8=a"])
                .contains("no file for porep:9")
        );
        assert!(
            err(&[
                "--circuit",
                "porep:8",
                "--params",
                "porep:9=a",
                "--params",
                "porep:8=b"
            ])
            .contains("porep:9, which is not among")
        );
        assert!(
            err(&[
                "--circuit",
                "porep:8",
                "--fake-params",
                "--params",
                "porep:8=a"
            ])
            .contains("cannot be used with")
        );
    }

    #[test]
    fn the_recorded_command_quotes_what_a_shell_would_split() {
        let line = shell_words(&[
            "cuzk-sweep".into(),
            "--grid".into(),
            "gpus=[0],[0,1]".into(),
            "--label".into(),
            "it's".into(),
        ]);
        assert_eq!(
            line,
            "cuzk-sweep --grid 'gpus=[0],[0,1]' --label 'it'\\''s'"
        );
    }
}
