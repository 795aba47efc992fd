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
//! holds writers back for one sync a few times a second at most.

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

/// The running checkpoint thread; [`Checkpointer::stop`] ends it.
pub struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    /// Starts checkpointing `store`'s file every `every`.
    pub fn start(store: LocalStore, every: Duration) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("zael-checkpoints".into())
            .spawn(move || {
                let mut failing = false;
                loop {
                    std::thread::park_timeout(every);
                    let last = flag.load(Ordering::Acquire);
                    let done = store
                        .checkpoint(CheckpointMode::Passive)
                        .and_then(|frames| {
                            if frames > RESTART_FRAMES {
                                store.checkpoint(CheckpointMode::Restart)?;
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
