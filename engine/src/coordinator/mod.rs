//! What every coordinator of the agent shares (groups now, transactions
//! next): a coordinator owns some keys (group ids, transactional ids), the
//! live agent with the highest rendezvous score of a key coordinates it,
//! its state lives in PostgreSQL, and every load of a key bumps an epoch
//! that fences the previous owner's writes.
//!
//! The pieces, each usable on its own by a coordinator's loop:
//! - [`owner_of`] / [`rendezvous_score`]: who coordinates a key; [`Owns`]
//!   asks it of the agent's current view.
//! - [`Slots`]: the keys in memory, loading (with their waiting calls) or
//!   loaded, each with its epoch, its [`WriteQueue`] to PostgreSQL and its
//!   timer; eviction of idle keys and the loaded-keys limit.
//! - [`Results`]: the bounded channel that brings PostgreSQL results
//!   (loads, writes, listings) back to the loop.
//! - [`start_thread`]: the coordinator's thread and tokio current-thread
//!   runtime; a panic aborts the agent.

mod ownership;
mod slots;
mod thread;
mod timers;
mod writes;

pub use ownership::{owner_of, rendezvous_score, Owns};
pub use slots::{Admit, KeyState, Limits, Loaded, Slot, Slots};
pub use thread::{start_thread, Results};
pub use timers::Timers;
pub use writes::WriteQueue;
