//! The progress bar of long plans and applies, on stderr, with the phase
//! (`reading levels`, `writing levels`, `fan-out`, `record`): drawn only when
//! stderr is a terminal, and only once the work has taken more than a
//! moment, so short runs and scripts see nothing. Cleared when done, so the
//! command's own output follows on a clean line.

use std::cell::Cell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::progress::Progress;

/// How long work runs before the bar appears.
const AFTER: Duration = Duration::from_millis(700);
/// Test-only: draw the bar after this many milliseconds instead.
pub const AFTER_ENV: &str = "ZAEL_PROGRESS_AFTER_MS";
/// Set: each phase's start is logged on stderr with the time since the
/// start (`phase writing levels at 12.3 s`), for benchmarks.
pub const LOG_ENV: &str = "ZAEL_PROGRESS_LOG";

/// A bar on stderr (hidden when stderr is not a terminal).
pub struct Bar {
    bar: ProgressBar,
    started: Instant,
    after: Duration,
    /// Drawing to the terminal (else: counting, hidden).
    shown: Cell<bool>,
    /// Whether stderr is a terminal at all.
    terminal: bool,
    log: bool,
}

impl Bar {
    pub fn stderr() -> Bar {
        let after = std::env::var(AFTER_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(AFTER, Duration::from_millis);
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        Bar {
            bar,
            started: Instant::now(),
            after,
            shown: Cell::new(false),
            terminal: std::io::stderr().is_terminal(),
            log: std::env::var_os(LOG_ENV).is_some(),
        }
    }

    /// Starts drawing once the work has taken long enough.
    fn show_if_due(&self) {
        if self.terminal && !self.shown.get() && self.started.elapsed() >= self.after {
            self.shown.set(true);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
}

impl Progress for Bar {
    fn phase(&self, name: &'static str, total: u64) {
        if self.log {
            let at = self.started.elapsed().as_secs_f64();
            let rss = rss_mb();
            self.bar
                .suspend(|| eprintln!("phase {name} ({total}) at {at:.2} s, {rss} MB resident"));
        }
        let template = if total > 0 {
            "{prefix:>14} {wide_bar} {human_pos}/{human_len} {eta}"
        } else {
            "{prefix:>14} {spinner}"
        };
        let style =
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
        self.bar.set_style(style);
        self.bar.set_prefix(name);
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.show_if_due();
        self.bar.tick();
    }

    fn advance(&self, n: u64) {
        self.bar.inc(n);
        self.show_if_due();
    }
}

/// This process's resident memory in MB (Linux; 0 elsewhere).
fn rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096 / (1024 * 1024))
}

impl Drop for Bar {
    fn drop(&mut self) {
        if self.log {
            let at = self.started.elapsed().as_secs_f64();
            let rss = rss_mb();
            self.bar
                .suspend(|| eprintln!("done at {at:.2} s, {rss} MB resident"));
        }
        self.bar.finish_and_clear();
    }
}
