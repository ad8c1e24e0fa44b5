//! The progress of a running matrix: a bar of exposed episodes so far out of cells × wanted,
//! the trials running and the ETA on a terminal, or one line per event otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use lockbench::matrix::{MatrixProgress, TrialStatus};

/// The progress bar: exposed episodes so far out of cells × wanted, the trials running, ETA.
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    running: Vec<String>,
}

impl Progress {
    pub(super) fn new(total: u64, disabled: bool) -> Self {
        let bar = (!disabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:24.cyan/blue} {pos}/{len} exposed episodes  {msg}  elapsed {elapsed}, ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Self {
            bar,
            running: Vec::new(),
        }
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("  {text}"),
        }
    }

    pub(super) fn show(&mut self, event: MatrixProgress<'_>) {
        match event {
            MatrixProgress::Probe { strategy } => {
                let text = format!("uncontended probe: {strategy} …");
                match &self.bar {
                    Some(bar) => bar.set_message(text),
                    None => eprintln!("  {text}"),
                }
            }
            MatrixProgress::Trial {
                strategy,
                fault,
                trial,
                ..
            } => {
                let cell = format!("{strategy} × {fault} t{trial}");
                if self.bar.is_none() {
                    eprintln!("  {cell} …");
                }
                self.running.push(cell);
                if let Some(bar) = &self.bar {
                    bar.set_message(self.running.join(", "));
                }
            }
            MatrixProgress::TrialDone {
                record,
                strategy,
                fault,
                exposed,
                progress,
            } => {
                let cell = format!("{strategy} × {fault} t{}", record.trial);
                self.running.retain(|c| c != &cell);
                let episodes = record.episodes.len();
                let hit = record.episodes.iter().filter(|e| e.exposed).count();
                let line = match record.status {
                    TrialStatus::Completed => {
                        format!("{cell}: {hit}/{episodes} episodes exposed, cell at {exposed}")
                    }
                    TrialStatus::Interrupted => format!("{cell}: interrupted"),
                    TrialStatus::Failed => {
                        format!("{cell}: FAILED: {}", record.error.as_deref().unwrap_or(""))
                    }
                };
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(progress);
                        bar.set_message(self.running.join(", "));
                        if record.status != TrialStatus::Completed {
                            bar.println(line);
                        }
                    }
                    None => eprintln!("  {line}"),
                }
            }
            MatrixProgress::BackOff { note } => self.line(format!("jobs: {note}")),
        }
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
