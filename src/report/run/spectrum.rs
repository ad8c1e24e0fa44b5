//! The latency percentile spectrum, HdrHistogram-plot style: the x axis is
//! `log10(1/(1-percentile))`, so 0%, 90%, 99%, 99.9%, 99.99% are evenly spaced, and the y
//! axis is latency in ms on a log scale.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::input::StrategyPercentiles;
use crate::report::common::figure::{ms_label_sparse, series_color, DrawResult, Figure, FONT};

/// Fewest decades shown (up to 99.99%).
const MIN_DECADES: u32 = 4;
/// Most decades shown (up to 99.99999%).
const MAX_DECADES: u32 = 7;

/// The label of decade `k` on the percentile axis: 0%, 90%, 99%, 99.9%, …
pub(crate) fn percentile_label(k: u32) -> String {
    match k {
        0 => "0%".to_string(),
        1 => "90%".to_string(),
        2 => "99%".to_string(),
        _ => format!("99.{}%", "9".repeat(k as usize - 2)),
    }
}

/// `log10(1/(1-q))`, with 100% (and anything past the axis) pinned to `decades`.
pub(crate) fn percentile_x(q: f64, decades: u32) -> f64 {
    if q >= 1.0 {
        return f64::from(decades);
    }
    (1.0 / (1.0 - q.max(0.0))).log10().min(f64::from(decades))
}

/// Decades needed to show every finite point of `series`, within the min and max.
fn decades_for(series: &[StrategyPercentiles]) -> u32 {
    let widest = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, _)| percentile_x(*q, MAX_DECADES))
        .fold(0.0_f64, f64::max);
    (widest.ceil() as u32).clamp(MIN_DECADES, MAX_DECADES)
}

/// The spectrum figure of every strategy in a run.
pub(crate) struct SpectrumFigure<'a> {
    pub(crate) title: String,
    pub(crate) series: &'a [StrategyPercentiles],
    /// Color index of each series (so colors match across plots).
    pub(crate) color_of: &'a dyn Fn(&str) -> usize,
}

impl Figure for SpectrumFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (960, 480)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let decades = decades_for(self.series);
        // Log latency axis: p50 in µs and a multi-second tail both stay readable.
        let (lo, hi) = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .map(|(_, us)| *us as f64 / 1000.0)
            .filter(|ms| *ms > 0.0)
            .fold((f64::MAX, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (y_min_ms, y_max_ms) = if hi > 0.0 {
            (lo / 1.5, hi * 1.5)
        } else {
            (0.01, 10.0)
        };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 22))
            .margin(14)
            .margin_right(40)
            .x_label_area_size(48)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..f64::from(decades), (y_min_ms..y_max_ms).log_scale())?;
        let label = |x: &f64| {
            let k = x.round();
            if (x - k).abs() < 1e-6 && k >= 0.0 {
                percentile_label(k as u32)
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_labels(decades as usize + 1)
            .x_label_formatter(&label)
            .y_label_formatter(&|v| ms_label_sparse(*v))
            .x_desc("percentile")
            .y_desc("acquire latency (ms, log)")
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for s in self.series {
            let color = series_color((self.color_of)(&s.strategy));
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .map(|(q, us)| {
                    let ms = (*us as f64 / 1000.0).max(y_min_ms);
                    (percentile_x(*q, decades), ms)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(s.strategy.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3))
                });
        }
        if !self.series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font((FONT, 15))
                .background_style(WHITE.mix(0.9))
                .border_style(RGBColor(180, 180, 180))
                .draw()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_axis_labels_and_positions() {
        let labels: Vec<String> = (0..5).map(percentile_label).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
        assert!((percentile_x(0.99, 4) - 2.0).abs() < 1e-9);
        assert!((percentile_x(0.999, 4) - 3.0).abs() < 1e-6);
        assert_eq!(percentile_x(0.0, 4), 0.0);
        assert_eq!(percentile_x(1.0, 5), 5.0);
    }

    #[test]
    fn decades_cover_the_deepest_finite_percentile() {
        let s = |q: f64| StrategyPercentiles {
            strategy: "x".into(),
            points: vec![(0.5, 10), (q, 20), (1.0, 30)],
        };
        assert_eq!(decades_for(&[s(0.99)]), MIN_DECADES);
        assert_eq!(decades_for(&[s(0.999_995)]), 6);
        assert_eq!(decades_for(&[]), MIN_DECADES);
    }
}
