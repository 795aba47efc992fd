//! Ctrl-C and SIGTERM during `limits apply`: the first one becomes a stop
//! request that the apply honours at its next safe point (then releases its
//! lock and exits 1); a second one exits at once with status 1, as Terraform
//! does (the lock then expires with its lease). Signals are handled through
//! `signal-hook`'s flag actions: the handler only stores an integer, and a
//! small thread prints the notice.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use signal_hook::consts::signal::{SIGINT, SIGTERM};
use signal_hook::SigId;

/// The signals that ask a command to stop.
const SIGNALS: [(i32, &str); 2] = [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")];

/// Stop requests by signal, while this value lives.
pub struct Interrupt {
    /// The signal number received last (0: none).
    which: Arc<AtomicUsize>,
    ids: Vec<SigId>,
    notice: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Interrupt {
    /// Installs the handlers. `notice` is printed on stderr when the first
    /// signal arrives. If a handler cannot be installed, that signal keeps
    /// its default action (the process ends; an apply's lock expires).
    pub fn install(notice: &'static str) -> Interrupt {
        let which = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        let mut ids = Vec::new();
        for (sig, _) in SIGNALS {
            // The exit must be registered first: it runs only when the flag
            // set by the action after it was already set (a second signal).
            let registered = signal_hook::flag::register_conditional_shutdown(
                sig,
                crate::exit_codes::FAILURE,
                armed.clone(),
            )
            .and_then(|a| Ok((a, signal_hook::flag::register(sig, armed.clone())?)))
            .and_then(|(a, b)| {
                Ok((
                    a,
                    b,
                    signal_hook::flag::register_usize(sig, which.clone(), sig as usize)?,
                ))
            });
            if let Ok((a, b, c)) = registered {
                ids.extend([a, b, c]);
            }
        }
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (which, done) = (which.clone(), done.clone());
            std::thread::Builder::new()
                .name("interrupt-notice".into())
                .spawn(move || loop {
                    // The signal is looked at before `done`, so one that
                    // arrived before the command ended is always told.
                    let sig = which.load(Ordering::SeqCst);
                    if sig != 0 {
                        super::output::eprintln(format!("\n{} received: {notice}", name(sig)));
                        return;
                    }
                    if done.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                })
        };
        Interrupt {
            which,
            ids,
            notice: thread.ok().map(|t| (done, t)),
        }
    }

    /// `Some("interrupted by SIGTERM")` once a signal arrived.
    pub fn requested(&self) -> Option<String> {
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(format!("interrupted by {}", name(sig))),
        }
    }
}

fn name(sig: usize) -> &'static str {
    SIGNALS
        .iter()
        .find(|(s, _)| *s as usize == sig)
        .map_or("a signal", |(_, n)| n)
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        if let Some((done, thread)) = self.notice.take() {
            done.store(true, Ordering::SeqCst);
            let _ = thread.join();
        }
    }
}
