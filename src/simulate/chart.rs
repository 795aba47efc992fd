//! The `--svg` chart, drawn with plotters' SVG backend: a panel of admitted
//! and refused requests over time, then one panel per limit with its
//! effective capacity (schedules show as steps), the least available to a
//! request in each time bucket, and its refusals on a second axis.

use chrono::DateTime;
use plotters::prelude::*;

use super::series::Series;

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

fn time_label(ms: &i64) -> String {
    DateTime::from_timestamp_millis(*ms)
        .map(|t| t.format("%a %H:%M").to_string())
        .unwrap_or_default()
}

fn width_label(ms: i64) -> String {
    super::clock::format_span(ms)
}

/// Draw the series as an SVG document.
pub fn render_svg(
    series: &Series,
    title: &str,
    panels: &[Panel<'_>],
) -> Result<String, ChartError> {
    let buckets = series.buckets();
    let origin = series.origin_ms().unwrap_or(0);
    let width = series.width_ms();
    let x_of = |i: usize| origin.saturating_add((i as i64).saturating_mul(width));
    let x_range = origin..x_of(buckets.len().max(1));
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
                format!("requests per {} (UTC)", width_label(width)),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range.clone(), 0f64..peak * 1.1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(12)
            .x_label_formatter(&time_label)
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
            .label("refused")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], REFUSED.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(err)?;

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
                .build_cartesian_2d(x_range.clone(), lo..hi)
                .map_err(err)?
                .set_secondary_coord(x_range.clone(), 0f64..max_refused * 1.1);
            chart
                .configure_mesh()
                .x_labels(12)
                .x_label_formatter(&time_label)
                .y_desc("capacity / available")
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(err)?;
            chart
                .configure_secondary_axes()
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
                .map_err(err)?
                .label("refused")
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], REFUSED.filled()));
            chart
                .draw_series(LineSeries::new(
                    steps(
                        (0..buckets.len()).map(|i| cap(i).capacity.map(|v| v as f64)),
                        &x_of,
                    ),
                    CAPACITY.stroke_width(2),
                ))
                .map_err(err)?
                .label("effective capacity")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], CAPACITY.stroke_width(2))
                });
            chart
                .draw_series(LineSeries::new(
                    steps(
                        (0..buckets.len()).map(|i| cap(i).low.map(|v| v as f64)),
                        &x_of,
                    ),
                    AVAILABLE,
                ))
                .map_err(err)?
                .label("least available")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], AVAILABLE));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .draw()
                .map_err(err)?;
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
        assert!(render_svg(&Series::new(0, 8), "empty", &[]).is_ok());
    }
}
