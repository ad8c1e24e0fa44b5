//! Horizontal bar charts for the comparison: one bar per (strategy, scenario) row, colored by
//! strategy; the latency chart overlays p50 (dark) on p99 (light) on a log axis.

use plotters::coord::ranged1d::{SegmentValue, SegmentedCoord};
use plotters::coord::types::{RangedCoordf64, RangedCoordusize};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::common::figure::{series_color, DrawResult, Figure, FONT};

/// One bar: label, color index, main value and an optional inner value drawn over it.
pub(crate) struct Bar {
    pub(crate) label: String,
    pub(crate) color: usize,
    pub(crate) value: f64,
    pub(crate) inner: Option<f64>,
}

/// A horizontal bar chart.
pub(crate) struct BarsFigure {
    pub(crate) title: String,
    pub(crate) x_desc: String,
    pub(crate) bars: Vec<Bar>,
    /// Fixed x maximum (e.g. 100 for percentages); `None` = from the data.
    pub(crate) x_max: Option<f64>,
    /// Legend text for the main and inner values, when `inner` is used.
    pub(crate) legend: Option<(String, String)>,
    /// Logarithmic x axis (whole decades; bars start at the axis' left end), so values of
    /// very different sizes (p50 next to a multi-second p99) all stay visible.
    pub(crate) log_x: bool,
}

/// The decade span `[lo, hi]` (powers of ten) covering every positive value.
fn decades(values: impl Iterator<Item = f64>) -> (i32, i32) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v.log10());
        hi = hi.max(v.log10());
    }
    if lo > hi {
        return (-1, 1);
    }
    let lo = lo.floor() as i32;
    let hi = (hi.ceil() as i32).max(lo + 1);
    (lo, hi)
}

/// `10^k` for an axis label: `0.01`, `0.1`, `1`, `10`, `1000`.
fn decade_label(k: i32) -> String {
    if k >= 0 {
        format!("{}", 10_u64.pow(k as u32))
    } else {
        format!("{:.*}", (-k) as usize, 10f64.powi(k))
    }
}

impl Figure for BarsFigure {
    fn size(&self) -> (u32, u32) {
        (960, 120 + 30 * self.bars.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let n = self.bars.len().max(1);
        let Axis {
            lo,
            hi,
            x_min,
            x_max,
        } = self.axis();
        let pos = |v: f64| self.pos(x_min, x_max, v);
        let x_label = |v: &f64| {
            if !self.log_x {
                return format!("{v}");
            }
            let k = v.round();
            if (v - k).abs() < 1e-6 {
                decade_label(k as i32)
            } else {
                String::new()
            }
        };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 22))
            .margin(12)
            .margin_right(28)
            .x_label_area_size(40)
            .y_label_area_size(330)
            // Integer ranges include their end: 0..n-1 is `n` segments. Row 0 is at the bottom,
            // so bar i goes to row n-1-i and the first bar is on top.
            .build_cartesian_2d(x_min..x_max, (0..n - 1).into_segmented())?;
        let label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(row) => (n - 1)
                .checked_sub(*row)
                .and_then(|i| self.bars.get(i))
                .map_or_else(String::new, |b| b.label.clone()),
            _ => String::new(),
        };
        let mut mesh = chart.configure_mesh();
        if self.log_x {
            mesh.x_labels((hi - lo) as usize + 1);
        }
        mesh.disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&label)
            .x_label_formatter(&x_label)
            .x_desc(self.x_desc.as_str())
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        let band = |i: usize, v: f64| {
            let row = n - 1 - i;
            [
                (x_min, SegmentValue::Exact(row)),
                (pos(v), SegmentValue::Exact(row + 1)),
            ]
        };
        chart.draw_series(self.bars.iter().enumerate().map(|(i, b)| {
            let c = series_color(b.color);
            let fill = if b.inner.is_some() {
                c.mix(0.35)
            } else {
                c.mix(0.85)
            };
            Rectangle::new(band(i, b.value), fill.filled())
        }))?;
        chart.draw_series(self.bars.iter().enumerate().filter_map(|(i, b)| {
            b.inner
                .map(|v| Rectangle::new(band(i, v), series_color(b.color).filled()))
        }))?;
        // White outlines keep neighbouring bars apart.
        chart.draw_series(
            self.bars
                .iter()
                .enumerate()
                .map(|(i, b)| Rectangle::new(band(i, b.value), WHITE.stroke_width(3))),
        )?;
        if let Some((outer, inner)) = &self.legend {
            draw_legend(&mut chart, x_min, outer, inner)?;
        }
        Ok(())
    }
}

/// Where the bars are drawn: the value range on the x axis (log10 of the values on a log
/// axis, from its left end) and its decades.
struct Axis {
    lo: i32,
    hi: i32,
    x_min: f64,
    x_max: f64,
}

impl BarsFigure {
    fn axis(&self) -> Axis {
        let (lo, hi) = decades(
            self.bars
                .iter()
                .flat_map(|b| std::iter::once(b.value).chain(b.inner)),
        );
        let (x_min, x_max) = if self.log_x {
            (f64::from(lo), f64::from(hi))
        } else {
            (
                0.0,
                self.x_max.unwrap_or_else(|| {
                    self.bars
                        .iter()
                        .map(|b| b.value.max(b.inner.unwrap_or(0.0)))
                        .fold(0.0_f64, f64::max)
                        .max(1e-9)
                        * 1.12
                }),
            )
        };
        Axis {
            lo,
            hi,
            x_min,
            x_max,
        }
    }

    /// Where value `v` ends on the x axis.
    fn pos(&self, x_min: f64, x_max: f64, v: f64) -> f64 {
        if self.log_x {
            if v > 0.0 {
                v.log10().clamp(x_min, x_max)
            } else {
                x_min
            }
        } else {
            v
        }
    }
}

/// The legend of the outer and inner values (grey swatches, lower right).
fn draw_legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordusize>>>,
    x_min: f64,
    outer: &str,
    inner: &str,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let grey = RGBColor(90, 90, 90);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [
                (x_min, SegmentValue::Exact(0)),
                (x_min, SegmentValue::Exact(0)),
            ],
            grey.mix(0.35).filled(),
        )))?
        .label(outer)
        .legend(move |(x, y)| {
            Rectangle::new([(x, y - 5), (x + 16, y + 5)], grey.mix(0.35).filled())
        });
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [
                (x_min, SegmentValue::Exact(0)),
                (x_min, SegmentValue::Exact(0)),
            ],
            grey.filled(),
        )))?
        .label(inner)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], grey.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(180, 180, 180))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_cover_all_values_and_label_round() {
        assert_eq!(decades([0.35, 1840.0, 0.0].into_iter()), (-1, 4));
        assert_eq!(decades([5.0].into_iter()), (0, 1));
        assert_eq!(decades(std::iter::empty()), (-1, 1));
        assert_eq!(decade_label(-2), "0.01");
        assert_eq!(decade_label(3), "1000");
    }
}
