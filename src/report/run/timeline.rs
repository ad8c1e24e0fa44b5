//! One strategy over time: acquire p99 per second, acquisitions and errors per second, and
//! the checker's anomalies, with the nemesis' fault windows shaded and labelled on all three.

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::input::{anomaly_kind, AnomalyKind, AnomalyMark, FaultMark};
use crate::report::common::figure::{
    ms_label_sparse, series_color, DrawResult, Figure, FAULT_SHADE, FONT,
};
use crate::results::TimelinePoint;

/// Width of the y label area, the same on all three panels so their time axes line up.
const LABEL_AREA: u32 = 170;

/// Space above the highest value, so the legend and fault labels sit above the data.
const HEADROOM: f64 = 1.6;

/// Most anomaly marks drawn per figure (the counts table has the totals).
pub(crate) const MAX_MARKS: usize = 2000;

/// The timeline figure of one strategy.
pub(crate) struct TimelineFigure<'a> {
    pub(crate) title: String,
    pub(crate) timeline: &'a [TimelinePoint],
    pub(crate) faults: Vec<&'a FaultMark>,
    pub(crate) anomalies: &'a [AnomalyMark],
    pub(crate) color: usize,
    /// The time axis reaches at least this far, s (so the client timeline below shares it).
    pub(crate) min_x_max: f64,
}

impl TimelineFigure<'_> {
    /// Right end of the time axis, s: whole seconds covering the data and `min_x_max`.
    pub(crate) fn x_max(&self) -> f64 {
        let t = self
            .timeline
            .iter()
            .map(|p| p.second as f64 + 1.0)
            .fold(1.0_f64, f64::max);
        let f = self
            .faults
            .iter()
            .map(|f| f.end_s())
            .fold(0.0_f64, f64::max);
        let a = self
            .anomalies
            .iter()
            .map(|a| a.time_s)
            .fold(0.0_f64, f64::max);
        t.max(f).max(a).max(self.min_x_max).ceil()
    }

    /// Anomaly kinds in order of first appearance.
    fn kinds(&self) -> Vec<AnomalyKind> {
        let mut kinds: Vec<AnomalyKind> = Vec::new();
        for a in self.anomalies {
            if !kinds.contains(&a.kind) {
                kinds.push(a.kind);
            }
        }
        kinds
    }

    fn shade_faults<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
        y0: f64,
        y1: f64,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        chart.draw_series(self.faults.iter().map(|f| {
            Rectangle::new(
                [(f.start_s(), y0), (f.end_s(), y1)],
                FAULT_SHADE.mix(0.25).filled(),
            )
        }))?;
        Ok(())
    }
}

impl Figure for TimelineFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (960, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, (FONT, 22))?;
        let (upper, rest) = root.split_vertically(270);
        let (middle, lower) = rest.split_vertically(250);
        let x_max = self.x_max();
        self.draw_p99(&upper, x_max)?;
        self.draw_rates(&middle, x_max)?;
        self.draw_anomalies(&lower, x_max)
    }
}

impl TimelineFigure<'_> {
    /// The upper panel: acquire p99 per second, ms, on a log axis, fault windows labelled.
    fn draw_p99<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, x_max: f64) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let color = series_color(self.color);
        // Acquire p99 per second, ms, on a log axis (a multi-second stall and sub-ms normal
        // seconds both stay readable); seconds with no acquisition leave a gap.
        let positive = self
            .timeline
            .iter()
            .filter(|p| p.acquired > 0 && p.acquire_p99_us > 0)
            .map(|p| p.acquire_p99_us as f64 / 1000.0);
        let (lo, hi) = positive.fold((f64::MAX, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (p99_min, p99_max) = if hi > 0.0 {
            (lo / 2.0, hi * HEADROOM * HEADROOM)
        } else {
            (0.01, 10.0)
        };
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .margin_right(28)
            .x_label_area_size(28)
            .y_label_area_size(LABEL_AREA)
            .build_cartesian_2d(0.0..x_max, (p99_min..p99_max).log_scale())?;
        chart
            .configure_mesh()
            .y_desc("acquire p99 (ms, log)")
            .y_label_formatter(&|v| ms_label_sparse(*v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        self.shade_faults(&mut chart, p99_min, p99_max)?;
        for (i, f) in self.faults.iter().enumerate() {
            // Label rows near the top of the log axis.
            let y = p99_max * (0.95 / (1.0 + 0.9 * (i % 3) as f64));
            chart.draw_series(std::iter::once(Text::new(
                f.label(),
                (f.start_s(), y),
                (FONT, 14)
                    .into_font()
                    .color(&RGBColor(150, 70, 0))
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            )))?;
        }
        let mut first = true;
        for run in self
            .timeline
            .chunk_by(|a, b| (a.acquired > 0) == (b.acquired > 0) && b.second == a.second + 1)
            .filter(|run| run[0].acquired > 0)
        {
            let pts: Vec<(f64, f64)> = run
                .iter()
                .map(|p| {
                    let ms = p.acquire_p99_us as f64 / 1000.0;
                    (p.second as f64 + 0.5, ms.max(p99_min))
                })
                .collect();
            let series = chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
            if first {
                series
                    .label("acquire p99 per second")
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3))
                    });
                first = false;
            }
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 2, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(180, 180, 180))
            .draw()?;

        Ok(())
    }

    /// The middle panel: acquisitions and errors per second.
    fn draw_rates<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        x_max: f64,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let color = series_color(self.color);
        // Acquisitions and errors per second.
        let rate_max = self
            .timeline
            .iter()
            .map(|p| p.acquired.max(p.errors) as f64)
            .fold(1.0_f64, f64::max)
            * HEADROOM;
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .margin_right(28)
            .x_label_area_size(28)
            .y_label_area_size(LABEL_AREA)
            .build_cartesian_2d(0.0..x_max, 0.0..rate_max)?;
        chart
            .configure_mesh()
            .y_desc("per second")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        self.shade_faults(&mut chart, 0.0, rate_max)?;
        let acquired = self
            .timeline
            .iter()
            .map(|p| (p.second as f64 + 0.5, p.acquired as f64));
        chart
            .draw_series(LineSeries::new(acquired, color.stroke_width(2)))?
            .label("acquired (throughput)")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3))
            });
        let red = RGBColor(200, 30, 30);
        let errors = self
            .timeline
            .iter()
            .map(|p| (p.second as f64 + 0.5, p.errors as f64));
        chart
            .draw_series(LineSeries::new(errors, red.stroke_width(1)))?
            .label("errors / timeouts")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], red.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(180, 180, 180))
            .draw()?;

        Ok(())
    }

    /// The lower panel: the checker's anomalies, one row per kind.
    fn draw_anomalies<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        x_max: f64,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        // Anomalies, one row per kind.
        let kinds = self.kinds();
        let rows = kinds.len().max(1);
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .margin_right(28)
            .x_label_area_size(40)
            .y_label_area_size(LABEL_AREA)
            // plotters' integer ranges include their end: 0..rows-1 is `rows` segments.
            .build_cartesian_2d(0.0..x_max, (0..rows - 1).into_segmented())?;
        let row_label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => kinds
                .get(*i)
                .map(|k| {
                    let n = self.anomalies.iter().filter(|a| &a.kind == k).count();
                    format!("{k} ({n})")
                })
                .unwrap_or_else(|| "no anomalies".to_string()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("seconds since start")
            .y_labels(rows)
            .y_label_formatter(&row_label)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        chart.draw_series(self.faults.iter().map(|f| {
            Rectangle::new(
                [
                    (f.start_s(), SegmentValue::Exact(0)),
                    (f.end_s(), SegmentValue::Last),
                ],
                FAULT_SHADE.mix(0.25).filled(),
            )
        }))?;
        chart.draw_series(self.anomalies.iter().take(MAX_MARKS).map(|a| {
            let row = kinds.iter().position(|k| k == &a.kind).unwrap_or(0);
            let benign = anomaly_kind::BENIGN.contains(&a.kind);
            let style = if benign {
                RGBColor(30, 110, 200).filled()
            } else {
                RGBColor(200, 30, 30).filled()
            };
            TriangleMarker::new((a.time_s, SegmentValue::CenterOf(row)), 6, style)
        }))?;
        Ok(())
    }
}
