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
//! (whose last one overshoots the restart by up to a busy step;
//! docs/serve.md#speed). A restart waits at most [`RESTART_BUSY`] for another
//! process's reader or writer, then gives way and is tried again a second
//! later, then less and less often (up to every [`GIVE_WAY_MAX`]) while it
//! keeps giving way, so a reader that stays open holds requests up for
//! [`RESTART_BUSY`] now and then, not every round; the run of give-ways
//! ends when the log is small again (another process restarted it). A
//! restart that took long, or a run of give-ways, is logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::error;
use crate::store::local::{CheckpointMode, LocalStore, RESTART_BUSY};
use crate::store::{Store, StoreError};

/// How often: at a few thousand decisions a second the log grows by about a
/// thousand pages a second, so it stays around a hundred pages.
pub const EVERY: Duration = Duration::from_millis(100);

/// The log size (pages, 4 KiB each) at which a checkpoint restarts the log:
/// about 16 MiB of disk at most.
pub const RESTART_FRAMES: u64 = 4_000;

/// After a restart gave way, the next try waits this long, twice as long
/// after each further one, up to [`GIVE_WAY_MAX`].
pub const GIVE_WAY_FIRST: Duration = Duration::from_secs(1);
pub const GIVE_WAY_MAX: Duration = Duration::from_secs(30);

/// A restart that held requests back this long is logged.
const SLOW_RESTART: Duration = Duration::from_millis(50);

/// Keeps the server's requests from its store while the value it returns
/// lives (the pool's permit); see the module docs.
pub type Hold = Box<dyn Fn() -> Box<dyn std::any::Any> + Send>;

/// When to checkpoint: every `every`, restarting past `restart_frames`;
/// after a restart gave way, not again for `give_way_first`, doubling up to
/// `give_way_max`.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub every: Duration,
    pub restart_frames: u64,
    pub give_way_first: Duration,
    pub give_way_max: Duration,
}

/// The server's: [`EVERY`], [`RESTART_FRAMES`], [`GIVE_WAY_FIRST`] and
/// [`GIVE_WAY_MAX`].
pub const SCHEDULE: Schedule = Schedule {
    every: EVERY,
    restart_frames: RESTART_FRAMES,
    give_way_first: GIVE_WAY_FIRST,
    give_way_max: GIVE_WAY_MAX,
};

/// What the thread keeps from one checkpoint to the next.
struct Round {
    store: LocalStore,
    schedule: Schedule,
    hold: Hold,
    /// The log's size at the last restart: until a write starts the log
    /// over it stays that size, and needs no other restart.
    restarted_at: Option<u64>,
    /// The last restart gave way to another process ([`RESTART_BUSY`]):
    /// how long the thread waits before it tries again, and until when.
    gave_way: Option<(Duration, Instant)>,
}

impl Round {
    /// A passive checkpoint, then a restart inside the hold if the log grew
    /// past the restart size. The `last` round needs no restart (the file's
    /// last connection removes the log) and takes no hold.
    fn run(&mut self, last: bool) -> Result<(), StoreError> {
        if !self.store.usable() {
            // The file was replaced at its path: checkpoint the one there now.
            self.store = self.store.reopened()?;
            self.restarted_at = None;
            self.gave_way = None;
        }
        let frames = self.store.checkpoint(CheckpointMode::Passive)?.frames;
        let due = frames > self.schedule.restart_frames && self.restarted_at != Some(frames);
        let waiting = self
            .gave_way
            .is_some_and(|(_, until)| Instant::now() < until);
        if !due {
            // The log is small again (another process restarted it): a run
            // of restarts that gave way is over, and the next one starts
            // from the first wait and is logged again.
            self.gave_way = None;
        }
        if !due || last || waiting {
            return Ok(());
        }
        let _held = (self.hold)();
        let started = Instant::now();
        let done = self.store.checkpoint(CheckpointMode::Restart)?;
        if done.blocked {
            // Said once per run of such restarts.
            let wait = match self.gave_way {
                None => {
                    error::log(&format!(
                        "cannot restart the local store's log: another process's reader or writer was in the way for {} ms; requests go on, the log file grows until a restart gets through (tried again in {} ms, then less often, up to every {} s)",
                        RESTART_BUSY.as_millis(),
                        self.schedule.give_way_first.as_millis(),
                        self.schedule.give_way_max.as_secs()
                    ));
                    self.schedule.give_way_first
                }
                Some((wait, _)) => (wait * 2).min(self.schedule.give_way_max),
            };
            self.gave_way = Some((wait, Instant::now() + wait));
            return Ok(());
        }
        self.gave_way = None;
        self.restarted_at = Some(frames);
        let took = started.elapsed();
        // Requests waited that long: say why.
        if took >= SLOW_RESTART {
            error::log(&format!(
                "restarting the local store's log held requests back for {} ms (a slow sync, or another process's reader or writer in the way)",
                took.as_millis()
            ));
        }
        Ok(())
    }
}

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
                let mut round = Round {
                    store,
                    schedule,
                    hold,
                    restarted_at: None,
                    gave_way: None,
                };
                loop {
                    std::thread::park_timeout(schedule.every);
                    let last = flag.load(Ordering::Acquire);
                    match round.run(last) {
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
    use std::path::Path;
    use std::sync::atomic::AtomicUsize;

    use tokio::sync::{OwnedSemaphorePermit, Semaphore};

    use super::*;
    use crate::store::backoff;
    use crate::store::item::keyed as item;
    use crate::store::local::{log_frames, Checkpoints};
    use crate::store::{Store, WriteOp};

    /// The test's stand-in for the server's pool: one permit, taken by
    /// spinning (no runtime here).
    fn take(pool: &Arc<Semaphore>) -> OwnedSemaphorePermit {
        loop {
            if let Ok(p) = pool.clone().try_acquire_owned() {
                return p;
            }
            std::thread::yield_now();
        }
    }

    thread_local! {
        static WAITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Counts a writer's waits for a busy database instead of sleeping them.
    fn count_wait(d: Duration) {
        WAITS.set(WAITS.get() + 1);
        std::thread::sleep(d);
    }

    /// A writer that takes the pool's permit for each write never meets the
    /// restart's lock (it waits for the permit instead), the log is
    /// restarted, and a log below the restart size takes no hold.
    #[test]
    fn a_restart_runs_inside_the_hold_and_starts_the_log_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let writer = LocalStore::open_with(&path, "t", Checkpoints::Deferred).unwrap();
        let write = |store: &LocalStore, sk: &str, i: usize| {
            let put = WriteOp::Put {
                item: item("p", &format!("{sk}{}", i % 50), &[]),
                condition: None,
            };
            store.write(put).unwrap();
        };
        for i in 0..300 {
            write(&writer, "a", i);
        }
        let pool = Arc::new(Semaphore::new(1));
        let holds = Arc::new(AtomicUsize::new(0));
        let hold = |pool: &Arc<Semaphore>, holds: &Arc<AtomicUsize>| -> Hold {
            let (pool, holds) = (pool.clone(), holds.clone());
            Box::new(move || {
                holds.fetch_add(1, Ordering::SeqCst);
                Box::new(take(&pool))
            })
        };
        let schedule = Schedule {
            every: Duration::from_millis(2),
            restart_frames: 100,
            ..SCHEDULE
        };
        let own = LocalStore::open(&path, "t").unwrap();
        let checkpointer = Checkpointer::start(own, schedule, hold(&pool, &holds)).unwrap();
        // Write, each time with the permit, while the log is restarted.
        let started = std::time::Instant::now();
        let mut i = 0;
        backoff::with_pauser(count_wait, || {
            while i < 1_000 || holds.load(Ordering::SeqCst) == 0 {
                assert!(started.elapsed() < Duration::from_secs(20), "no restart");
                let _permit = take(&pool);
                write(&writer, "b", i);
                i += 1;
            }
        });
        checkpointer.stop();
        assert_eq!(WAITS.get(), 0, "a write met the restart's lock");
        // Restarted: the log stays near the restart size, however many writes.
        assert!(
            log_frames(&path) < 300 + 100,
            "{} frames",
            log_frames(&path)
        );
        // A log below the restart size: no restart, no hold.
        let small = dir.path().join("small.sqlite");
        let writer = LocalStore::open_with(&small, "t", Checkpoints::Deferred).unwrap();
        for i in 0..50 {
            write(&writer, "c", i);
        }
        let before = holds.load(Ordering::SeqCst);
        let own = LocalStore::open(&small, "t").unwrap();
        let checkpointer = Checkpointer::start(own, schedule, hold(&pool, &holds)).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        checkpointer.stop();
        assert_eq!(holds.load(Ordering::SeqCst), before);
    }

    /// `n` items written from `from` on: the log grows past 100 frames.
    fn grow(writer: &LocalStore, from: usize, n: usize) {
        for i in from..from + n {
            let put = WriteOp::Put {
                item: item("p", &format!("s{i}"), &[]),
                condition: None,
            };
            writer.write(put).unwrap();
        }
    }

    /// A store whose log grew past 100 frames, with its writer.
    fn grown() -> (tempfile::TempDir, std::path::PathBuf, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let writer = LocalStore::open_with(&path, "t", Checkpoints::Deferred).unwrap();
        grow(&writer, 0, 300);
        (dir, path, writer)
    }

    /// Another process's reader, in a transaction: a restart gives way to it.
    fn reader_in_the_way(path: &Path) -> rusqlite::Connection {
        let reader = rusqlite::Connection::open(path).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM sqlite_master;")
            .unwrap();
        reader
    }

    /// A round on `path` restarting past 100 frames, giving way for `first`
    /// after its first blocked restart.
    fn round(path: &Path, first: Duration, hold: Hold) -> Round {
        Round {
            store: LocalStore::open(path, "t").unwrap(),
            schedule: Schedule {
                every: Duration::from_millis(2),
                restart_frames: 100,
                give_way_first: first,
                give_way_max: Duration::from_secs(60),
            },
            hold,
            restarted_at: None,
            gave_way: None,
        }
    }

    /// A restart that gave way is tried again after `give_way_first`, not
    /// in the rounds before (which take no hold), and after that
    /// twice as long.
    #[test]
    fn a_restart_that_gave_way_is_tried_again_later() {
        let (_dir, path, _writer) = grown();
        let reader = reader_in_the_way(&path);
        let holds = Arc::new(AtomicUsize::new(0));
        let counted = holds.clone();
        let first = Duration::from_secs(1);
        let hold: Hold = Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::new(())
        });
        let mut round = round(&path, first, hold);
        round.run(false).unwrap();
        assert_eq!(round.gave_way.map(|(wait, _)| wait), Some(first));
        assert_eq!(round.restarted_at, None);
        // Before the wait is over: no hold, no restart.
        round.run(false).unwrap();
        assert_eq!(holds.load(Ordering::SeqCst), 1);
        // After it, tried again; given way again, it waits twice as long.
        std::thread::sleep(first);
        round.run(false).unwrap();
        assert_eq!(holds.load(Ordering::SeqCst), 2);
        assert_eq!(round.gave_way.map(|(wait, _)| wait), Some(first * 2));
        // The reader gone, the next try gets through.
        reader.execute_batch("COMMIT;").unwrap();
        std::thread::sleep(first * 2);
        round.run(false).unwrap();
        assert_eq!(holds.load(Ordering::SeqCst), 3);
        assert_eq!(round.gave_way, None);
        assert!(round.restarted_at.is_some());
    }

    /// A run of restarts that gave way ends when another process restarts
    /// the log: the next run starts from the first wait again.
    #[test]
    fn a_log_restarted_elsewhere_ends_the_give_way_run() {
        let (_dir, path, writer) = grown();
        let reader = reader_in_the_way(&path);
        let first = Duration::from_millis(50);
        let mut round = round(&path, first, Box::new(|| Box::new(())));
        round.run(false).unwrap();
        std::thread::sleep(first);
        round.run(false).unwrap();
        assert_eq!(round.gave_way.map(|(wait, _)| wait), Some(first * 2));
        // Another process restarts the log once the reader is gone.
        reader.execute_batch("COMMIT;").unwrap();
        reader
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        round.run(false).unwrap();
        assert_eq!(round.gave_way, None);
        // A new run that gives way starts from the first wait.
        grow(&writer, 300, 300);
        let _reader = reader_in_the_way(&path);
        round.run(false).unwrap();
        assert_eq!(round.gave_way.map(|(wait, _)| wait), Some(first));
    }
}
