//! The record bytes all fetches of one shard may hold while assembling
//! responses ([`crate::limits::FETCH_BYTES_INFLIGHT_MAX`]); past it
//! fetches answer with less (or no) data.

use std::cell::Cell;
use std::rc::Rc;

pub struct FetchBudget {
    free_bytes: Rc<Cell<usize>>,
}

impl FetchBudget {
    pub fn new(bytes: usize) -> FetchBudget {
        FetchBudget {
            free_bytes: Rc::new(Cell::new(bytes)),
        }
    }

    /// Reserves up to `want` bytes.
    pub fn reserve(&self, want: usize) -> FetchGrant {
        let free = self.free_bytes.get();
        let bytes = want.min(free);
        self.free_bytes.set(free - bytes);
        FetchGrant {
            free_bytes: self.free_bytes.clone(),
            bytes,
        }
    }
}

/// Fetch bytes reserved from the shard's budget; returned on drop.
pub struct FetchGrant {
    free_bytes: Rc<Cell<usize>>,
    pub bytes: usize,
}

impl FetchGrant {
    /// Returns what was reserved beyond `used` to the shard.
    pub fn shrink_to(&mut self, used: usize) {
        if used < self.bytes {
            let b = &self.free_bytes;
            b.set(b.get() + self.bytes - used);
            self.bytes = used;
        }
    }
}

impl Drop for FetchGrant {
    fn drop(&mut self) {
        let b = &self.free_bytes;
        b.set(b.get() + self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_return_what_they_do_not_use() {
        let budget = FetchBudget::new(100);
        let mut a = budget.reserve(70);
        assert_eq!(a.bytes, 70);
        let b = budget.reserve(70);
        assert_eq!(b.bytes, 30, "only what is left");
        a.shrink_to(20);
        assert_eq!(budget.reserve(100).bytes, 50);
        drop(a);
        drop(b);
        assert_eq!(budget.reserve(1000).bytes, 100);
    }
}
