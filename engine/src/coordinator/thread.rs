//! A coordinator's thread: one tokio current-thread runtime running its
//! loop, and the channel that brings results of PostgreSQL work spawned by
//! the loop back to it.

use std::future::Future;

use tokio::sync::mpsc;

use crate::limits::RESULTS_QUEUED_MAX;

/// Where spawned work sends its result to the coordinator's loop. Bounded;
/// it cannot deadlock because only spawned tasks send on it, never the loop
/// that receives.
pub struct Results<D> {
    tx: mpsc::Sender<D>,
}

impl<D> Clone for Results<D> {
    fn clone(&self) -> Self {
        Results {
            tx: self.tx.clone(),
        }
    }
}

impl<D: Send + 'static> Results<D> {
    /// A results channel, and its receiving end for the loop.
    pub fn channel() -> (Results<D>, mpsc::Receiver<D>) {
        let (tx, rx) = mpsc::channel(RESULTS_QUEUED_MAX);
        (Results { tx }, rx)
    }

    /// Runs `work` on the coordinator's runtime; its result reaches the
    /// loop (or is dropped if the loop has ended).
    pub fn spawn(&self, work: impl Future<Output = D> + Send + 'static) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(work.await).await;
        });
    }
}

/// Starts a coordinator's thread `name`: `run` makes its loop, which runs on
/// a tokio current-thread runtime until it returns. A panic aborts the
/// agent: the coordinator's state is in PostgreSQL, so a restarted agent
/// (or another one) carries on, whereas limping on without a coordinator
/// would fail every call to it forever. `what` names it in the log.
pub fn start_thread<F, Fut>(
    name: &str,
    what: &'static str,
    run: F,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            let run = std::panic::AssertUnwindSafe(|| rt.block_on(run()));
            if std::panic::catch_unwind(run).is_err() {
                tracing::error!("the {what} panicked; aborting the agent");
                std::process::abort();
            }
        })
}
