//! `cuzk pce`: a Filecoin circuit's PCE recorded from its blank circuit
//! into a PCE directory, and this process's peak memory.

use std::time::Instant;

use anyhow::{Result, bail};

use crate::PceArgs;

/// `cuzk pce`.
pub(crate) fn record_blank_pce(args: &PceArgs) -> Result<()> {
    let blank = match (&args.seal_proof, &args.post_proof, &args.update_proof) {
        (Some(n), _, _) => cuzk_filecoin::porep::blank_pce(n.parse()?),
        (_, Some(n), _) => cuzk_filecoin::post::blank_pce(n.parse()?),
        (_, _, Some(n)) => cuzk_filecoin::update::blank_pce(n.parse()?),
        _ => bail!("give --seal-proof, --post-proof or --update-proof"),
    }?;
    let pce = &blank.pce;
    println!(
        "recorded {} in {:.3} s: {} constraints, {} inputs, {} aux; nnz A/B/C {}/{}/{}; {} bytes in \
         memory",
        blank.shape,
        blank.record_seconds,
        pce.num_constraints(),
        pce.num_inputs,
        pce.num_aux,
        pce.nnz()[0],
        pce.nnz()[1],
        pce.nnz()[2],
        pce.bytes()
    );
    if let Some(peak) = peak_rss() {
        println!("peak resident memory after recording: {peak}");
    }
    let t = Instant::now();
    let path = blank.write_to(&args.out_dir)?;
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({len} bytes) in {:.3} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    if args.read_back {
        // Read as an engine reads it, with the recorded PCE dropped first.
        let counts = cuzk_engine::pce_file::ShapeCounts::of(pce);
        let shape = blank.shape.clone();
        drop(blank);
        let t = Instant::now();
        let read = cuzk_engine::pce_file::read_pce(&path, &shape, Some(counts))?;
        println!(
            "read it back in {:.3} s ({} constraints)",
            t.elapsed().as_secs_f64(),
            read.num_constraints()
        );
        if let Some(peak) = peak_rss() {
            println!("peak resident memory: {peak}");
        }
    }
    Ok(())
}

/// This process's peak resident memory as the kernel reports it (Linux).
pub(crate) fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map(|v| v.trim().to_owned())
}
