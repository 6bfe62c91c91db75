//! SVG plots of a sweep, drawn from its JSON document alone: per swept key,
//! one file `<stem>-<key>.svg` with throughput (proofs/s, median with a
//! min-max bar) above and the GPU busy fraction below, against the key's
//! values, one series per circuit (and per combination of the other swept
//! keys, when there are any). A sweep without a grid gets one plot against
//! the circuits, `<stem>-circuit.svg`.
//!
//! plotters' SVG backend writes text as SVG `<text>` elements and estimates
//! label sizes itself, so nothing here needs fonts or system libraries.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{PointResult, SweepDoc, file_safe};

/// Series colours (Tableau 10: distinct, and readable on white).
const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn color(i: usize) -> RGBAColor {
    let (r, g, b) = COLORS[i % COLORS.len()];
    RGBColor(r, g, b).to_rgba()
}

/// Room on the right of each panel for the legend, in pixels.
const LEGEND_WIDTH: u32 = 320;

/// One line: its name and its points (x index, median, min, max).
#[derive(Debug, Clone, PartialEq)]
struct Series {
    name: String,
    points: Vec<(usize, f64, f64, f64)>,
}

/// The x axis of one plot: the swept values, evenly spaced in the order
/// given (worker counts 1, 2, 4, 8 sit one step apart, and names such as
/// `resident`, `streamed` work the same way).
#[derive(Debug, Clone, PartialEq)]
struct XAxis {
    title: String,
    values: Vec<String>,
}

impl XAxis {
    fn new(title: &str, values: &[String]) -> XAxis {
        XAxis {
            title: title.to_owned(),
            values: values.to_vec(),
        }
    }

    /// The index of `value`.
    fn position(&self, value: &str) -> Option<usize> {
        self.values.iter().position(|v| v == value)
    }

    fn label(&self, at: &SegmentValue<usize>) -> String {
        match at {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                self.values.get(*i).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        }
    }
}

/// Draws every plot of `doc` into `dir`, named after `stem`; returns the
/// files written.
pub fn draw(doc: &SweepDoc, dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let axes = &doc.sweep.grid.axes;
    if axes.is_empty() {
        let x = XAxis::new("circuit", &doc.sweep.circuits);
        let all = |pick: &dyn Fn(&PointResult) -> (f64, f64, f64)| {
            vec![Series {
                name: format!("{} partitions", doc.sweep.partitions),
                points: doc
                    .results
                    .iter()
                    .filter_map(|r| {
                        let (m, lo, hi) = pick(r);
                        Some((x.position(&r.circuit)?, m, lo, hi))
                    })
                    .collect(),
            }]
        };
        let path = dir.join(format!("{stem}-circuit.svg"));
        draw_file(
            &path,
            &title(doc, "circuit"),
            &x,
            &all(&throughput),
            &all(&busy),
        )?;
        written.push(path);
        return Ok(written);
    }
    for axis in axes {
        let x = XAxis::new(&axis.key, &axis.values);
        let rates = series(doc, &axis.key, &x, &throughput);
        let busy = series(doc, &axis.key, &x, &busy);
        let path = dir.join(format!("{stem}-{}.svg", file_safe(&axis.key)));
        draw_file(&path, &title(doc, &axis.key), &x, &rates, &busy)?;
        written.push(path);
    }
    Ok(written)
}

fn throughput(r: &PointResult) -> (f64, f64, f64) {
    (
        r.proofs_per_s.median,
        r.proofs_per_s.min,
        r.proofs_per_s.max,
    )
}

fn busy(r: &PointResult) -> (f64, f64, f64) {
    (r.gpu_busy.median, r.gpu_busy.min, r.gpu_busy.max)
}

fn title(doc: &SweepDoc, key: &str) -> String {
    let backend = doc
        .results
        .first()
        .map(|r| r.backend.as_str())
        .unwrap_or("?");
    format!(
        "{key}: {} partitions, {} repeats, {backend} on {} ({})",
        doc.sweep.partitions, doc.sweep.repeats, doc.machine.gpu, doc.revision
    )
}

/// One series per circuit and combination of the other keys' values, in
/// the order the results ran.
fn series(
    doc: &SweepDoc,
    key: &str,
    x: &XAxis,
    pick: &dyn Fn(&PointResult) -> (f64, f64, f64),
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in &doc.results {
        let Some(at) = r.settings.get(key).and_then(|v| x.position(v)) else {
            continue;
        };
        let others: Vec<String> = r
            .settings
            .0
            .iter()
            .filter(|(k, _)| k != key)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let name = if others.is_empty() {
            r.circuit.clone()
        } else {
            format!("{} {}", r.circuit, others.join(" "))
        };
        let (m, lo, hi) = pick(r);
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((at, m, lo, hi)),
            None => out.push(Series {
                name,
                points: vec![(at, m, lo, hi)],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by_key(|p| p.0);
    }
    out
}

fn draw_file(path: &Path, title: &str, x: &XAxis, rates: &[Series], busy: &[Series]) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let root = root.titled(title, ("sans-serif", 18)).map_err(plot_error)?;
    let (top, bottom) = root.split_vertically(450);
    let top_y = rates
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.3.max(p.1)))
        .fold(0.0, f64::max);
    panel(&top, x, rates, "proofs/s", (0.0, (top_y * 1.15).max(1e-9)))?;
    panel(&bottom, x, busy, "GPU busy fraction", (0.0, 1.05))?;
    root.present().map_err(plot_error)?;
    Ok(())
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    x: &XAxis,
    series: &[Series],
    y_title: &str,
    (y0, y1): (f64, f64),
) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .margin_right(LEGEND_WIDTH)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (0..x.values.len().saturating_sub(1)).into_segmented(),
            y0..y1,
        )
        .map_err(plot_error)?;
    let label = |v: &SegmentValue<usize>| x.label(v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc(x.title.as_str())
        .y_desc(y_title)
        .x_labels(x.values.len())
        .x_label_formatter(&label)
        .draw()
        .map_err(plot_error)?;
    let at = |i: usize| SegmentValue::CenterOf(i);
    for (i, s) in series.iter().enumerate() {
        let color = color(i);
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|p| (at(p.0), p.1)),
                color.stroke_width(2),
            ))
            .map_err(plot_error)?;
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|p| Circle::new((at(p.0), p.1), 4, color.filled())),
            )
            .map_err(plot_error)?;
        chart
            .draw_series(s.points.iter().map(|p| {
                PathElement::new(vec![(at(p.0), p.2), (at(p.0), p.3)], color.stroke_width(1))
            }))
            .map_err(plot_error)?;
    }
    // The legend, drawn by hand in the right margin: plotters' own legend
    // is clipped to the plotting area, where it would hide data.
    let (left, _) = chart.plotting_area().get_pixel_range();
    let x0 = left.end + 16;
    for (i, s) in series.iter().enumerate() {
        let color = color(i);
        let y = 24 + 20 * i as i32;
        area.draw(&PathElement::new(
            vec![(x0, y), (x0 + 24, y)],
            color.stroke_width(2),
        ))
        .map_err(plot_error)?;
        area.draw(&Circle::new((x0 + 12, y), 4, color.filled()))
            .map_err(plot_error)?;
        let style = ("sans-serif", 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(s.name.clone(), (x0 + 32, y), style))
            .map_err(plot_error)?;
    }
    Ok(())
}

fn plot_error<E: std::error::Error + Send + Sync + 'static>(
    e: DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_sit_at_their_index_and_are_labelled() {
        let x = XAxis::new("workers_per_device", &["1".into(), "2".into(), "4".into()]);
        assert_eq!(x.position("4"), Some(2));
        assert_eq!(x.position("3"), None);
        assert_eq!(x.label(&SegmentValue::CenterOf(1)), "2");
        assert_eq!(x.label(&SegmentValue::Last), "");
        assert_eq!(x.label(&SegmentValue::CenterOf(7)), "");
    }
}
