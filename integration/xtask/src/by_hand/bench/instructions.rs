//! `bench-overhead --instructions`: the tables of QEMU's host instructions
//! in the workload's loop (the runner's `callgrind`). The baseline of a
//! row is the first row of its group of `group` rows, as in
//! [`super::cpu_table`].

use super::{Outcome, Sample};
use crate::scenario::Instructions;

fn counts(o: &Outcome) -> Vec<&Instructions> {
    match o {
        Outcome::Measured(s) => s
            .iter()
            .filter_map(|x: &Sample| x.instructions.as_ref())
            .collect(),
        Outcome::Failed(_) => Vec::new(),
    }
}

/// The run whose total is the median (the lower one of an even count), so
/// that its functions add up to the total the table shows.
fn median_run<'a>(v: &[&'a Instructions]) -> Option<&'a Instructions> {
    let mut v = v.to_vec();
    v.sort_by_key(|i| i.total);
    v.get(v.len().saturating_sub(1) / 2).copied()
}

fn generated(i: &Instructions) -> u64 {
    i.by_function
        .iter()
        .find(|(f, _)| f == crate::runner::callgrind::GENERATED)
        .map_or(0, |(_, n)| *n)
}

fn giga(n: u64) -> String {
    format!("{:.3} G", n as f64 / 1e9)
}

/// Points of `base`: 100 × (n − base) / base.
fn points(n: u64, base: u64) -> String {
    if base == 0 {
        "–".into()
    } else {
        format!("{:+.2}", 100.0 * (n as f64 - base as f64) / base as f64)
    }
}

/// Per configuration: the median total, the spread of the runs
/// ((largest − smallest) / median), the overhead over the baseline in
/// points, and how much of the total is generated code.
pub fn table(rows: &[(&str, Outcome)], group: usize) -> String {
    let mut t = String::from(
        "| configuration | runs | QEMU instructions (median) | spread | vs baseline (points) | in generated code | outside it |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut base = None;
    for (i, (name, o)) in rows.iter().enumerate() {
        if i % group.max(1) == 0 {
            base = None;
        }
        let v = counts(o);
        let Some(m) = median_run(&v) else {
            t.push_str(&format!("| {name} | – | no count | | | | |\n"));
            continue;
        };
        let b = *base.get_or_insert(m.total);
        let lo = v.iter().map(|i| i.total).min().unwrap_or(0);
        let hi = v.iter().map(|i| i.total).max().unwrap_or(0);
        let spread = if v.len() < 2 || m.total == 0 {
            "–".to_string()
        } else {
            format!("{:.2} %", 100.0 * (hi - lo) as f64 / m.total as f64)
        };
        t.push_str(&format!(
            "| {name} | {} | {} | {spread} | {} | {} | {} |\n",
            v.len(),
            giga(m.total),
            points(m.total, b),
            giga(generated(m)),
            giga(m.total - generated(m).min(m.total)),
        ));
    }
    t
}

/// Where each configuration's extra instructions go: the `top` functions
/// whose count grew most over the baseline's, each in points of the
/// baseline's total.
pub fn growth_table(rows: &[(&str, Outcome)], group: usize, top: usize) -> String {
    let mut t = String::from(
        "| configuration | function | instructions | baseline's | growth (points of the baseline) |\n\
         |---|---|---|---|---|\n",
    );
    let mut base: Option<&Instructions> = None;
    for (i, (name, o)) in rows.iter().enumerate() {
        let first = i % group.max(1) == 0;
        let Some(m) = median_run(&counts(o)) else {
            if first {
                base = None;
            }
            continue;
        };
        if first {
            base = Some(m);
            continue;
        }
        let Some(b) = base else { continue };
        for (f, n, was) in growth(m, b).into_iter().take(top) {
            t.push_str(&format!(
                "| {name} | `{f}` | {} | {} | {} |\n",
                giga(n),
                giga(was),
                points(b.total + (n - was), b.total),
            ));
        }
    }
    t
}

/// `m`'s functions with their count in `b`, largest growth first.
fn growth(m: &Instructions, b: &Instructions) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = m
        .by_function
        .iter()
        .map(|(f, n)| {
            let was = b
                .by_function
                .iter()
                .find(|(g, _)| g == f)
                .map_or(0, |(_, n)| *n);
            (f.clone(), *n, was)
        })
        .filter(|(_, n, was)| n > was)
        .collect();
    v.sort_by(|a, b| (b.1 - b.2).cmp(&(a.1 - a.2)).then_with(|| a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(total: u64, funcs: &[(&str, u64)]) -> Sample {
        Sample {
            workload: Duration::from_secs(1),
            wall: Duration::from_secs(1),
            sampled: Duration::from_secs(1),
            samples: None,
            records: None,
            cpu: None,
            instructions: Some(Instructions {
                total,
                by_function: funcs.iter().map(|(f, n)| (f.to_string(), *n)).collect(),
            }),
        }
    }

    fn rows() -> Vec<(&'static str, Outcome)> {
        let gen = crate::runner::callgrind::GENERATED;
        vec![
            (
                "off",
                Outcome::Measured(vec![
                    run(1000, &[(gen, 800), ("tlb", 200)]),
                    run(1010, &[(gen, 810), ("tlb", 200)]),
                ]),
            ),
            (
                "on",
                Outcome::Measured(vec![run(
                    1150,
                    &[(gen, 850), ("tlb", 210), ("arm_spe_select", 90)],
                )]),
            ),
        ]
    }

    #[test]
    fn overhead_in_points_of_the_baseline_and_the_spread() {
        let t = table(&rows(), 2);
        // Baseline: the lower median run of two (1000), spread 10/1000.
        assert!(t.contains("| off | 2 | 0.000 G | 1.00 % | +0.00 |"), "{t}");
        assert!(t.contains("| on | 1 | 0.000 G | – | +15.00 |"), "{t}");
    }

    #[test]
    fn growth_is_ranked_and_new_functions_count_from_nothing() {
        let t = growth_table(&rows(), 2, 2);
        let lines: Vec<&str> = t.lines().skip(2).collect();
        assert_eq!(lines.len(), 2, "{t}");
        assert!(
            lines[0].contains("`arm_spe_select`") && lines[0].ends_with("| +9.00 |"),
            "{t}"
        );
        assert!(
            lines[1].contains("(generated code)") && lines[1].ends_with("| +5.00 |"),
            "{t}"
        );
    }

    #[test]
    fn a_failed_configuration_has_no_count() {
        let rows = vec![("off", Outcome::Failed("timeout".into()))];
        assert!(table(&rows, 1).contains("| off | – | no count |"));
        assert_eq!(growth_table(&rows, 1, 3).lines().count(), 2);
    }
}
