//! Run results: the one summary struct every exporter reads, and the files of a run directory.
//!
//! | file | what |
//! |---|---|
//! | [`summary`] | [`RunSummary`]: config, per-strategy counts, latency percentiles (µs), throughput timeline |
//! | [`collected`] | a [`StrategySummary`] from the driver's collector |
//! | [`merged`] | exact merged latency: per-second interval histograms of several sources summed per second and overall |
//! | [`live`] | [`LiveMetrics`]: the run's counters, latency buckets, holders, faults, harness lag and proxy bytes as OpenMetrics text |
//! | [`live_endpoint`] | [`MetricsEndpoint`]: `--metrics ADDR`, the HTTP listener serving `/metrics` while a run goes and a bounded linger after it |
//! | [`hgrm`] | HdrHistogram percentile-distribution text (`.hgrm`), the format HistogramLogAnalyzer and hdrhistogram.github.io/HdrHistogram/plotFiles.html read |
//! | [`progress`] | [`ProgressWriter`]: the progress files rewritten every second off the clients' runtime (latest wins) |
//! | [`run_dir`] | `results/<run-id>/` created up front, files rewritten atomically as the run goes, `results/latest` link |
//! | [`table`] | the per-strategy console table |

pub mod collected;
pub mod hgrm;
pub mod live;
pub mod live_endpoint;
pub mod merged;
pub mod progress;
pub mod run_dir;
pub mod summary;
pub mod table;

pub use live::{LiveMetrics, StrategyMeter};
pub use live_endpoint::{MetricsEndpoint, MetricsEndpointError};
pub use progress::ProgressWriter;
pub use run_dir::{run_dirs_below, RunDir, RunDirError};
pub use summary::{
    CheckSummary, HarnessHealth, LatencySummary, RunStatus, RunSummary, StrategySummary,
    TimelinePoint,
};
