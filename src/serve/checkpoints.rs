//! The local store's checkpoints, off the request path. SQLite copies its
//! write-ahead log back into the store file inside the commit that grows the
//! log past 1,000 pages, and that commit waits for two syncs: with a request a
//! few hundred microseconds long, those commits were the p99 of `serve` on
//! one connection (docs/serve.md#speed). The server's stores are opened with
//! [`Checkpoints::Deferred`](crate::store::local::Checkpoints::Deferred), and
//! this thread checkpoints on a store of its own every [`EVERY`] instead:
//! passive checkpoints, which never wait for nor hold back a reader or a
//! writer, and — since a log that writers keep appending to is never started
//! over — a restarting one once the log passes [`RESTART_FRAMES`], which
//! holds writers back for the copy of the last frames and two syncs a few
//! times a second at most. For that restart the thread first takes the
//! server's own store out of the pool ([`Hold`]): the requests wait for it in
//! line, asynchronously, instead of polling SQLite's lock with short sleeps
//! (whose last one overshoots the restart by up to a busy step, and on a
//! two-worker server made the 32-item p99; docs/serve.md#speed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::error;
use crate::store::local::{CheckpointMode, LocalStore};

/// How often: at a few thousand decisions a second the log grows by about a
/// thousand pages a second, so it stays around a hundred pages.
pub const EVERY: Duration = Duration::from_millis(100);

/// The log size (pages, 4 KiB each) at which a checkpoint restarts the log:
/// about 16 MiB of disk at most.
pub const RESTART_FRAMES: u64 = 4_000;

/// A restart that held requests back this long is logged.
const SLOW_RESTART: Duration = Duration::from_millis(50);

/// Holds the server's writers back while it lives; see the module docs.
pub type Hold = Box<dyn Fn() -> Box<dyn std::any::Any> + Send>;

/// When to checkpoint: every `every`, restarting past `restart_frames`.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub every: Duration,
    pub restart_frames: u64,
}

/// The server's: [`EVERY`] and [`RESTART_FRAMES`].
pub const SCHEDULE: Schedule = Schedule {
    every: EVERY,
    restart_frames: RESTART_FRAMES,
};

/// The running checkpoint thread; [`Checkpointer::stop`] ends it.
pub struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    /// Starts checkpointing `store`'s file on `schedule`; `hold` keeps this
    /// process's writers out during a restart.
    pub fn start(
        store: LocalStore,
        schedule: Schedule,
        hold: Hold,
    ) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("zael-checkpoints".into())
            .spawn(move || {
                let mut failing = false;
                loop {
                    std::thread::park_timeout(schedule.every);
                    let last = flag.load(Ordering::Acquire);
                    let done = store
                        .checkpoint(CheckpointMode::Passive)
                        .and_then(|frames| {
                            // The last round needs no restart (the file's
                            // last connection removes the log) and no hold.
                            if frames > schedule.restart_frames && !last {
                                let _held = hold();
                                let started = std::time::Instant::now();
                                store.checkpoint(CheckpointMode::Restart)?;
                                let took = started.elapsed();
                                // Requests waited that long: say why.
                                if took >= SLOW_RESTART {
                                    error::log(&format!(
                                        "restarting the local store's log held requests back for {} ms (the disk's sync was slow)",
                                        took.as_millis()
                                    ));
                                }
                            }
                            Ok(())
                        });
                    match done {
                        Ok(()) => failing = false,
                        // Logged once per run of failures: the requests go
                        // on, but the log file grows until one succeeds.
                        Err(e) if !failing => {
                            failing = true;
                            error::log(&format!("cannot checkpoint the local store: {e}"));
                        }
                        Err(_) => {}
                    }
                    if last {
                        break;
                    }
                }
            })?;
        Ok(Checkpointer { stop, thread })
    }

    /// Runs one last checkpoint and ends the thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::store::item::keyed as item;
    use crate::store::local::Checkpoints;
    use crate::store::{Store, WriteOp};

    fn log_frames(path: &std::path::Path) -> u64 {
        let wal = path.with_extension("sqlite-wal");
        std::fs::metadata(wal).map_or(0, |m| m.len()) / (4096 + 24)
    }

    /// A log past the restart size is restarted inside `hold`, and only
    /// then: the writes after it start the log over.
    #[test]
    fn a_restart_runs_inside_the_hold_and_starts_the_log_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let writer = LocalStore::open_with(&path, "t", Checkpoints::Deferred).unwrap();
        let write = |n: usize, sk: &str| {
            for i in 0..n {
                let put = WriteOp::Put {
                    item: item("p", &format!("{sk}{i}"), &[]),
                    condition: None,
                };
                writer.write(put).unwrap();
            }
        };
        write(300, "a");
        let grown = log_frames(&path);
        assert!(grown >= 300, "{grown}");
        let holds = Arc::new(AtomicUsize::new(0));
        let counted = holds.clone();
        let hold: Hold = Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::new(())
        });
        let schedule = Schedule {
            every: Duration::from_millis(5),
            restart_frames: 200,
        };
        let own = LocalStore::open(&path, "t").unwrap();
        let checkpointer = Checkpointer::start(own, schedule, hold).unwrap();
        let started = std::time::Instant::now();
        while holds.load(Ordering::SeqCst) == 0 {
            assert!(started.elapsed() < Duration::from_secs(10), "no restart");
            std::thread::sleep(Duration::from_millis(5));
        }
        checkpointer.stop();
        let restarts = holds.load(Ordering::SeqCst);
        // The log restarted: new writes go to its start, it does not grow.
        write(50, "b");
        assert_eq!(log_frames(&path), grown, "the log grew after the restart");
        // Below the restart size: no more holds.
        let own = LocalStore::open(&path, "t").unwrap();
        let counted = holds.clone();
        let hold: Hold = Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::new(())
        });
        let checkpointer = Checkpointer::start(own, schedule, hold).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        checkpointer.stop();
        assert_eq!(holds.load(Ordering::SeqCst), restarts);
    }
}
