//! The soak's plot: the backend's memory (above) and its descriptors and
//! threads (below) against the run's minutes, a vertical line at each
//! restart, as SVG.

use super::proc::Sample;
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

type Series<'a> = (&'a str, RGBColor, Box<dyn Fn(&Sample) -> f64 + 'a>);

pub fn draw(path: &Path, samples: &[Sample], restarts_min: &[f64], title: &str) -> Result<()> {
    let e = |e: &dyn std::fmt::Display| anyhow!("plotting {}: {e}", path.display());
    let root = SVGBackend::new(path, (960, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(|x| e(&x))?;
    let (upper, lower) = root.split_vertically(300);
    let memory: Vec<Series> = vec![
        ("VmRSS (MiB)", BLUE, Box::new(|s| s.rss_kib as f64 / 1024.0)),
        (
            "RssAnon (MiB)",
            RED,
            Box::new(|s| s.anon_kib as f64 / 1024.0),
        ),
    ];
    let counts: Vec<Series> = vec![
        ("descriptors", GREEN, Box::new(|s| s.fds as f64)),
        ("threads", MAGENTA, Box::new(|s| s.threads as f64)),
    ];
    panel(&upper, samples, restarts_min, "MiB", &memory).map_err(|x| e(&x))?;
    panel(&lower, samples, restarts_min, "count", &counts).map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    samples: &[Sample],
    restarts_min: &[f64],
    unit: &str,
    series: &[Series],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let x_max = samples.last().map_or(1.0, |s| s.t / 60.0).max(1.0);
    let y_max = series
        .iter()
        .flat_map(|(_, _, f)| samples.iter().map(f))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("minutes")
        .y_desc(unit)
        .draw()?;
    for &t in restarts_min {
        chart.draw_series(LineSeries::new(
            [(t, 0.0), (t, y_max)],
            BLACK.mix(0.4).stroke_width(1),
        ))?;
    }
    for (name, color, f) in series {
        // One line per backend process: a restart starts a new one.
        let mut first = true;
        for pid in pids(samples) {
            let pts = samples
                .iter()
                .filter(|s| s.pid == pid)
                .map(|s| (s.t / 60.0, f(s)));
            let drawn = chart.draw_series(LineSeries::new(pts, color.stroke_width(2)))?;
            if first {
                let c = *color;
                drawn
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c));
                first = false;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn pids(samples: &[Sample]) -> Vec<u32> {
    let mut p: Vec<u32> = samples.iter().map(|s| s.pid).collect();
    p.dedup();
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_is_an_svg_with_a_line_per_process_and_the_restarts() {
        let samples: Vec<Sample> = (0..40)
            .map(|i| Sample {
                t: i as f64 * 30.0,
                pid: if i < 20 { 10 } else { 11 },
                rss_kib: 40_000 + i * 10,
                anon_kib: 8_000,
                fds: 30,
                threads: 6,
                cpu_s: 0.0,
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("soak-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("soak.svg");
        draw(&file, &samples, &[10.0], "a test").unwrap();
        let svg = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("RssAnon (MiB)") && svg.contains("descriptors"));
        // Four series, each drawn for two processes, and two restart lines.
        assert!(svg.matches("<polyline").count() >= 10, "{svg}");
    }
}
