//! The memory pool of the columnar build ([`crate::columnar`]): fair shares that idle shares
//! can lend.
//!
//! DataFusion's `FairSpillPool` caps every spilling operator at `pool / spilling operators`,
//! which keeps one sort partition from starving another, but also makes a partition spill at
//! its share while most of the pool is idle. The columnar build hashes time chunks to sort
//! partitions, so partitions differ in size by design (one may hold four days, another none),
//! and the hash repartition registers spilling operators of its own that hold only the batches
//! in flight. Measured on the 10M-row benchmark, the fair pool spilled a third of a gigabyte
//! with nine tenths of the pool unused.
//!
//! [`LendingFairPool`] lends what is idle: a spilling operator may grow past its share only
//! while the memory left free still covers what the others are owed: an operator holding
//! memory is owed the rest of its share, one holding nothing (an empty partition, or the
//! repartition between batches) a quarter of a share, enough to start and then spill as it
//! goes. A borrower that cannot grow spills, which frees memory for the others. The total never
//! exceeds the pool.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// A memory pool of `pool_size` bytes with fair shares for spilling operators and lending of
/// idle shares (see the module docs).
#[derive(Debug)]
pub(crate) struct LendingFairPool {
    pool_size: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes held by each registered spilling consumer (by consumer id).
    spilling: HashMap<usize, usize>,
    /// Sum of `spilling`.
    spilling_total: usize,
    /// Bytes held by consumers that cannot spill.
    unspillable: usize,
}

impl LendingFairPool {
    /// A pool of `pool_size` bytes.
    pub(crate) fn new(pool_size: usize) -> Self {
        LendingFairPool {
            pool_size,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent numbers (every update is one
        // statement), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Display for LendingFairPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lending-fair(pool_size: {})", self.pool_size)
    }
}

fn exhausted(r: &MemoryReservation, additional: usize, why: &str) -> DataFusionError {
    DataFusionError::ResourcesExhausted(format!(
        "cannot grow {} by {additional} bytes (holding {}): {why}",
        r.consumer().name(),
        r.size()
    ))
}

impl MemoryPool for LendingFairPool {
    fn name(&self) -> &str {
        "lending-fair"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.state().spilling.entry(consumer.id()).or_insert(0);
        }
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            let mut s = self.state();
            if let Some(held) = s.spilling.remove(&consumer.id()) {
                s.spilling_total -= held;
            }
        }
    }

    fn grow(&self, r: &MemoryReservation, additional: usize) {
        let mut s = self.state();
        if r.consumer().can_spill() {
            *s.spilling.entry(r.consumer().id()).or_insert(0) += additional;
            s.spilling_total += additional;
        } else {
            s.unspillable += additional;
        }
    }

    fn shrink(&self, r: &MemoryReservation, shrink: usize) {
        let mut s = self.state();
        if r.consumer().can_spill() {
            let held = s.spilling.entry(r.consumer().id()).or_insert(0);
            let by = shrink.min(*held);
            *held -= by;
            s.spilling_total -= by;
        } else {
            s.unspillable = s.unspillable.saturating_sub(shrink);
        }
    }

    fn try_grow(&self, r: &MemoryReservation, additional: usize) -> DfResult<()> {
        let mut s = self.state();
        let used = s.unspillable + s.spilling_total;
        if used + additional > self.pool_size {
            return Err(exhausted(r, additional, "the pool is full"));
        }
        if !r.consumer().can_spill() {
            s.unspillable += additional;
            return Ok(());
        }
        let id = r.consumer().id();
        let held = s.spilling.get(&id).copied().unwrap_or(0);
        let share = self.pool_size.saturating_sub(s.unspillable) / s.spilling.len().max(1);
        if held + additional > share {
            // Borrowing: what stays free must cover what the others are owed.
            let owed: usize = s
                .spilling
                .iter()
                .filter(|(other, _)| **other != id)
                .map(|(_, h)| {
                    if *h == 0 {
                        share / 4
                    } else {
                        share.saturating_sub(*h)
                    }
                })
                .sum();
            if self.pool_size - (used + additional) < owed {
                return Err(exhausted(
                    r,
                    additional,
                    "past its share and the rest is owed",
                ));
            }
        }
        *s.spilling.entry(id).or_insert(0) += additional;
        s.spilling_total += additional;
        Ok(())
    }

    fn reserved(&self) -> usize {
        let s = self.state();
        s.unspillable + s.spilling_total
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.pool_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn spiller(pool: &Arc<dyn MemoryPool>, name: &str) -> MemoryReservation {
        MemoryConsumer::new(name)
            .with_can_spill(true)
            .register(pool)
    }

    #[test]
    fn lends_idle_shares_but_keeps_what_others_are_owed() {
        let pool: Arc<dyn MemoryPool> = Arc::new(LendingFairPool::new(1200));
        let a = spiller(&pool, "a");
        let b = spiller(&pool, "b");
        let c = spiller(&pool, "c");
        // Shares are 400 each; b holds 300 of its own, c nothing.
        b.try_grow(300).unwrap();
        a.try_grow(400).unwrap();
        // a borrows while b's remaining 100 and c's starting quarter (100) stay free.
        a.try_grow(300).unwrap();
        assert_eq!(pool.reserved(), 1000);
        assert!(a.try_grow(1).is_err());
        // c can start; once it holds memory it is owed the rest of its share, which a, past
        // its own, can no longer take.
        c.try_grow(100).unwrap();
        assert!(a.try_grow(1).is_err());
        // b still gets its share; then the pool is full.
        b.try_grow(100).unwrap();
        assert_eq!(pool.reserved(), 1200);
        assert!(c.try_grow(1).is_err());
        // What a frees goes to the others.
        a.shrink(300);
        c.try_grow(300).unwrap();
        assert_eq!(pool.reserved(), 1200);
        // With c gone the shares are 600: a may reach its share, not borrow b's 200.
        drop(c);
        a.try_grow(200).unwrap();
        assert!(a.try_grow(1).is_err());
        b.try_grow(200).unwrap();
        assert_eq!(pool.reserved(), 1200);
    }

    #[test]
    fn never_exceeds_the_pool_and_counts_unspillable() {
        let pool: Arc<dyn MemoryPool> = Arc::new(LendingFairPool::new(100));
        let a = spiller(&pool, "a");
        let u = MemoryConsumer::new("u").register(&pool);
        u.try_grow(60).unwrap();
        assert!(a.try_grow(41).is_err());
        a.try_grow(40).unwrap();
        assert!(u.try_grow(1).is_err());
        a.shrink(40);
        u.try_grow(40).unwrap();
        assert_eq!(pool.reserved(), 100);
        drop(u);
        drop(a);
        assert_eq!(pool.reserved(), 0);
    }
}
