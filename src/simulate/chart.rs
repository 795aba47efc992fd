//! The `--svg` chart, drawn with plotters' SVG backend: a panel of admitted
//! and refused requests over time, then one panel per limit with its
//! effective capacity (schedules show as steps), the least available to a
//! request in each time bucket, and its refusals on a second axis.

use chrono::{DateTime, Offset, TimeZone};
use chrono_tz::Tz;
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;

use super::series::{Point, Series};

/// The chart could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot draw the chart: {0}")]
pub struct ChartError(String);

fn err<E: std::fmt::Display>(e: E) -> ChartError {
    ChartError(e.to_string())
}

const WIDTH: u32 = 1100;
const TITLE_HEIGHT: u32 = 40;
const PANEL_HEIGHT: u32 = 230;
const GREEN: RGBColor = RGBColor(46, 139, 87);
const CAPACITY: RGBColor = RGBColor(31, 119, 180);
const AVAILABLE: RGBColor = RGBColor(60, 60, 60);
const REFUSED: RGBColor = RGBColor(214, 39, 40);

/// One limit's panel heading.
pub struct Panel<'a> {
    pub name: &'a str,
    pub description: String,
}

/// Tick spacings for the time axis, shortest first.
const TICK_STEPS_MS: [i64; 14] = [
    1_000,
    10_000,
    60_000,
    300_000,
    900_000,
    1_800_000,
    3_600_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    172_800_000,
    604_800_000,
    2_419_200_000,
];

/// The legend every chart has: top right, over a light background.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), ChartError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

/// At most ~10 ticks on round local times (whole minutes, hours, midnights)
/// in `tz`, using the zone's offset at the start of the range.
fn ticks(start: i64, end: i64, tz: Tz) -> (i64, Vec<i64>) {
    let span = end.saturating_sub(start).max(1);
    let step = TICK_STEPS_MS
        .iter()
        .copied()
        .find(|&s| span / s <= 10)
        .unwrap_or_else(|| span / 10 + 1);
    let offset = DateTime::from_timestamp_millis(start)
        .map(|t| {
            i64::from(
                tz.offset_from_utc_datetime(&t.naive_utc())
                    .fix()
                    .local_minus_utc(),
            ) * 1000
        })
        .unwrap_or(0);
    let first = start
        .saturating_add(offset)
        .div_euclid(step)
        .saturating_mul(step)
        .saturating_sub(offset);
    let mut out = Vec::new();
    let mut t = if first < start {
        first.saturating_add(step)
    } else {
        first
    };
    while t <= end && out.len() < 64 {
        out.push(t);
        t = t.saturating_add(step);
    }
    (step, out)
}

fn time_label(ms: i64, step: i64, tz: Tz) -> String {
    let fmt = if step >= 86_400_000 {
        "%a %d %b"
    } else if step >= 60_000 {
        "%a %H:%M"
    } else {
        "%H:%M:%S"
    };
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.with_timezone(&tz).format(fmt).to_string())
        .unwrap_or_default()
}

/// `1,500`, `25k`, `2.0M`: short labels for the value axes.
fn value_label(v: &f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 || *v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Draw the series as an SVG document; times on the axis are read in `tz`.
pub fn render_svg(
    series: &Series,
    title: &str,
    panels: &[Panel<'_>],
    tz: Tz,
) -> Result<String, ChartError> {
    let buckets = series.buckets();
    let origin = series.origin_ms().unwrap_or(0);
    let width = series.width_ms();
    let x_of = |i: usize| origin.saturating_add((i as i64).saturating_mul(width));
    let x_end = x_of(buckets.len().max(1));
    let (step, keys) = ticks(origin, x_end, tz);
    let x_range = || (origin..x_end).with_key_points(keys.clone());
    let x_fmt = |ms: &i64| time_label(*ms, step, tz);
    let height = TITLE_HEIGHT + PANEL_HEIGHT * (1 + panels.len() as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, rest) = root.split_vertically(TITLE_HEIGHT);
        top.titled(title, ("sans-serif", 18)).map_err(err)?;
        let areas = rest.split_evenly((1 + panels.len(), 1));

        // Requests: admitted and refused per bucket.
        let peak = buckets
            .iter()
            .map(|b| b.admitted.max(b.refused))
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let mut chart = ChartBuilder::on(&areas[0])
            .caption(
                format!(
                    "requests per {} (times in {})",
                    zae_limiter_engine::duration::human_duration(width),
                    tz.name()
                ),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range(), 0f64..peak * 1.6)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&value_label)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        let admitted = steps(buckets.iter().map(|b| Some(b.admitted as f64)), &x_of);
        let refused = steps(buckets.iter().map(|b| Some(b.refused as f64)), &x_of);
        chart
            .draw_series(AreaSeries::new(admitted, 0.0, GREEN.mix(0.35)).border_style(GREEN))
            .map_err(err)?
            .label("admitted")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], GREEN.filled()));
        chart
            .draw_series(AreaSeries::new(refused, 0.0, REFUSED.mix(0.45)).border_style(REFUSED))
            .map_err(err)?
            .label("refused (right axis below)")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], REFUSED.filled()));
        // The limit panels' lines, explained once here (no data in this panel).
        chart
            .draw_series(LineSeries::new(std::iter::empty::<(i64, f64)>(), CAPACITY))
            .map_err(err)?
            .label("effective capacity (schedules applied)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], CAPACITY.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(std::iter::empty::<(i64, f64)>(), AVAILABLE))
            .map_err(err)?
            .label("least available to a request")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], AVAILABLE));
        draw_legend(&mut chart)?;

        for (k, panel) in panels.iter().enumerate() {
            let cap = |i: usize| buckets[i].limits.get(k).copied().unwrap_or_default();
            let values = (0..buckets.len()).flat_map(|i| {
                let p = cap(i);
                [p.capacity, p.low].into_iter().flatten()
            });
            let (lo, hi) = values.fold((0i128, 1i128), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let (lo, hi) = (lo as f64, hi as f64 * 1.1);
            let max_refused = (0..buckets.len())
                .map(|i| cap(i).refused)
                .max()
                .unwrap_or(0)
                .max(1) as f64;
            let mut chart = ChartBuilder::on(&areas[k + 1])
                .caption(
                    format!("{}: {}", panel.name, panel.description),
                    ("sans-serif", 14),
                )
                .margin(8)
                .x_label_area_size(24)
                .y_label_area_size(64)
                .right_y_label_area_size(56)
                .build_cartesian_2d(x_range(), lo..hi)
                .map_err(err)?
                .set_secondary_coord(x_range(), 0f64..max_refused * 1.1);
            chart
                .configure_mesh()
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&value_label)
                .y_desc("capacity / available")
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(err)?;
            chart
                .configure_secondary_axes()
                .y_label_formatter(&value_label)
                .y_desc("refused")
                .draw()
                .map_err(err)?;
            chart
                .draw_secondary_series(
                    AreaSeries::new(
                        steps(
                            (0..buckets.len()).map(|i| Some(cap(i).refused as f64)),
                            &x_of,
                        ),
                        0.0,
                        REFUSED.mix(0.3),
                    )
                    .border_style(REFUSED),
                )
                .map_err(err)?;
            // The two limit lines: one value of each bucket's point, as steps.
            let line = |value: fn(Point) -> Option<i128>| {
                steps(
                    (0..buckets.len()).map(|i| value(cap(i)).map(|v| v as f64)),
                    &x_of,
                )
            };
            chart
                .draw_series(LineSeries::new(
                    line(|p| p.capacity),
                    CAPACITY.stroke_width(2),
                ))
                .map_err(err)?;
            chart
                .draw_series(LineSeries::new(line(|p| p.low), AVAILABLE))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One limit's panel of `limits explain --svg`: its effective capacity as
/// steps (each value holds from its instant to the next), and its reset edges.
pub struct CapacityPanel<'a> {
    pub name: &'a str,
    pub description: String,
    /// `(from_ms, capacity)`, in time order, the first at the chart's start.
    pub steps: Vec<(i64, f64)>,
    pub resets: Vec<i64>,
}

/// Effective capacity per limit over `[start, end]`, one panel each, drawn
/// like `limits simulate`'s limit panels (times on the axis read in `tz`).
pub fn render_capacity_svg(
    title: &str,
    panels: &[CapacityPanel<'_>],
    start: i64,
    end: i64,
    tz: Tz,
) -> Result<String, ChartError> {
    let end = end.max(start.saturating_add(1));
    let (step, keys) = ticks(start, end, tz);
    let x_range = || (start..end).with_key_points(keys.clone());
    let x_fmt = |ms: &i64| time_label(*ms, step, tz);
    let height = TITLE_HEIGHT + PANEL_HEIGHT * (panels.len().max(1) as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, rest) = root.split_vertically(TITLE_HEIGHT);
        top.titled(title, ("sans-serif", 18)).map_err(err)?;
        let areas = rest.split_evenly((panels.len().max(1), 1));
        for (panel, area) in panels.iter().zip(&areas) {
            let hi = panel.steps.iter().map(|(_, v)| *v).fold(1.0f64, f64::max) * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(
                    format!(
                        "{}: {} (times in {})",
                        panel.name,
                        panel.description,
                        tz.name()
                    ),
                    ("sans-serif", 14),
                )
                .margin(8)
                .x_label_area_size(24)
                .y_label_area_size(64)
                .build_cartesian_2d(x_range(), 0f64..hi)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&value_label)
                .y_desc("effective capacity")
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(err)?;
            let mut line = Vec::with_capacity(panel.steps.len() * 2);
            for (i, (from, v)) in panel.steps.iter().enumerate() {
                let to = panel.steps.get(i + 1).map_or(end, |(t, _)| *t);
                line.push((*from, *v));
                line.push((to, *v));
            }
            chart
                .draw_series(LineSeries::new(line, CAPACITY.stroke_width(2)))
                .map_err(err)?
                .label("effective capacity")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], CAPACITY.stroke_width(2))
                });
            if !panel.resets.is_empty() {
                chart
                    .draw_series(
                        panel
                            .resets
                            .iter()
                            .map(|&t| PathElement::new(vec![(t, 0.0), (t, hi)], REFUSED.mix(0.6))),
                    )
                    .map_err(err)?
                    .label("quota reset")
                    .legend(|(x, y)| {
                        PathElement::new(vec![(x + 7, y - 5), (x + 7, y + 5)], REFUSED)
                    });
            }
            draw_legend(&mut chart)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A step line through bucket values: each value holds for its whole
/// bucket; buckets without a value carry the previous one.
fn steps(
    values: impl Iterator<Item = Option<f64>>,
    x_of: &impl Fn(usize) -> i64,
) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    let mut last = None;
    for (i, v) in values.enumerate() {
        let Some(v) = v.or(last) else { continue };
        last = Some(v);
        out.push((x_of(i), v));
        out.push((x_of(i + 1), v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_round_local_times() {
        // 2026-12-07T00:00:02Z + 7 days, read in New York (UTC-5): midnights there.
        let start = 1_796_601_602_000;
        let (step, keys) = ticks(start, start + 7 * 86_400_000, chrono_tz::America::New_York);
        assert_eq!(step, 86_400_000);
        assert_eq!(keys[0], 1_796_619_600_000, "2026-12-07T05:00:00Z");
        assert_eq!(
            time_label(keys[0], step, chrono_tz::America::New_York),
            "Mon 07 Dec"
        );
        let (step, keys) = ticks(start, start + 3_600_000, chrono_tz::UTC);
        assert_eq!((step, keys.len()), (900_000, 4));
        assert_eq!(time_label(keys[0], step, chrono_tz::UTC), "Mon 00:15");
        assert_eq!(value_label(&2_000_000.0), "2.0M");
        assert_eq!(value_label(&25_000.0), "25k");
        assert_eq!(value_label(&500.0), "500");
        assert_eq!(value_label(&0.5), "0.5");
    }

    #[test]
    fn steps_hold_each_value_for_its_bucket() {
        let x = |i: usize| i as i64 * 10;
        let pts = steps([Some(1.0), None, Some(3.0)].into_iter(), &x);
        assert_eq!(
            pts,
            [
                (0, 1.0),
                (10, 1.0),
                (10, 1.0),
                (20, 1.0),
                (20, 3.0),
                (30, 3.0)
            ]
        );
        assert!(steps([None, None].into_iter(), &x).is_empty());
    }

    #[test]
    fn an_svg_with_one_panel_per_limit() {
        let mut s = Series::new(2, 64);
        for i in 0..100 {
            s.record(
                i * 1000,
                i % 7 != 0,
                [(10, 5, i % 7 == 0), (3, 1, false)].into_iter(),
            );
        }
        let svg = render_svg(
            &s,
            "u on r",
            &[
                Panel {
                    name: "rpm",
                    description: "bucket".into(),
                },
                Panel {
                    name: "jobs",
                    description: "3 at once".into(),
                },
            ],
            chrono_tz::UTC,
        )
        .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        for text in [
            "u on r",
            "rpm: bucket",
            "jobs: 3 at once",
            "effective capacity",
            "refused",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        // An empty series still draws.
        assert!(render_svg(&Series::new(0, 8), "empty", &[], chrono_tz::UTC).is_ok());
    }

    #[test]
    fn a_capacity_chart_with_one_panel_per_limit() {
        let day = 86_400_000;
        let svg = render_capacity_svg(
            "u on r",
            &[CapacityPanel {
                name: "rpm",
                description: "1,000/min".into(),
                steps: vec![(0, 1000.0), (day / 2, 500.0)],
                resets: vec![day / 4],
            }],
            0,
            day,
            chrono_tz::UTC,
        )
        .unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "u on r",
            "rpm: 1,000/min",
            "effective capacity",
            "quota reset",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(render_capacity_svg("none", &[], 0, 0, chrono_tz::UTC).is_ok());
    }
}
