//! The record buffer between a Kinesis task's fetch workers and its reading thread: Druid's
//! `MemoryBoundLinkedBlockingQueue` of `KinesisRecordSupplier`, bounded by bytes
//! (`recordBufferSizeBytes`).
//!
//! An entry is admitted when the buffer is empty or when its size added to the bytes held stays
//! within the capacity, so the buffer never holds more than the capacity, or one entry when a
//! single entry is larger than the capacity (at most the capacity plus one record). Fetch
//! workers (async tasks) wait for room with [`RecordBuffer::offer`]; the reading thread takes
//! entries with [`RecordBuffer::drain`], up to `maxBytesPerPoll` bytes and at least one entry.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting [`RecordBuffer::offer`] looks for room again.
const OFFER_RECHECK: Duration = Duration::from_millis(5);

/// A FIFO of entries with a size each, bounded by the sum of the sizes (bytes).
#[derive(Debug)]
pub(crate) struct RecordBuffer<T> {
    capacity: usize,
    inner: Mutex<Inner<T>>,
    not_empty: Condvar,
}

#[derive(Debug)]
struct Inner<T> {
    queue: VecDeque<(T, usize)>,
    bytes: usize,
}

impl<T> RecordBuffer<T> {
    /// An empty buffer holding at most `capacity` bytes (see the module docs).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                bytes: 0,
            }),
            not_empty: Condvar::new(),
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().expect("buffer lock").bytes
    }

    /// Entries held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().expect("buffer lock").queue.len()
    }

    /// Adds `item` of `size` bytes if it fits now (the buffer is empty, or the bytes held plus
    /// `size` stay within the capacity); gives it back otherwise.
    pub(crate) fn try_offer(&self, item: T, size: usize) -> Result<(), T> {
        let mut inner = self.inner.lock().expect("buffer lock");
        if !inner.queue.is_empty() && inner.bytes.saturating_add(size) > self.capacity {
            return Err(item);
        }
        inner.bytes += size;
        inner.queue.push_back((item, size));
        drop(inner);
        self.not_empty.notify_all();
        Ok(())
    }

    /// Adds a control entry (no bytes: the end of a shard, a fetch error) whatever the bytes held.
    pub(crate) fn push_control(&self, item: T) {
        self.inner
            .lock()
            .expect("buffer lock")
            .queue
            .push_back((item, 0));
        self.not_empty.notify_all();
    }

    /// Adds `item` of `size` bytes, waiting up to `timeout` for room (Druid's
    /// `recordBufferOfferTimeout`); gives it back when there is still no room then, or as soon as
    /// `wanted` turns false (the shard was sought elsewhere, the supplier closed).
    pub(crate) async fn offer(
        &self,
        mut item: T,
        size: usize,
        timeout: Duration,
        wanted: impl Fn() -> bool,
    ) -> Result<(), T> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.try_offer(item, size) {
                Ok(()) => return Ok(()),
                Err(back) => item = back,
            }
            let now = Instant::now();
            if now >= deadline || !wanted() {
                return Err(item);
            }
            tokio::time::sleep(OFFER_RECHECK.min(deadline - now)).await;
        }
    }

    /// Takes entries from the front while the bytes taken stay within `max_bytes` (at least
    /// one entry: Druid's `maxBytesPerPoll`), waiting up to `timeout` for the first. Blocks the
    /// calling thread (not for use on a runtime thread).
    pub(crate) fn drain(&self, max_bytes: usize, timeout: Duration) -> Vec<T> {
        let deadline = Instant::now() + timeout;
        let mut inner = self.inner.lock().expect("buffer lock");
        while inner.queue.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Vec::new();
            }
            inner = self
                .not_empty
                .wait_timeout(inner, deadline - now)
                .expect("buffer lock")
                .0;
        }
        let mut out = Vec::new();
        let mut taken = 0usize;
        while let Some((_, size)) = inner.queue.front() {
            if !out.is_empty() && taken.saturating_add(*size) > max_bytes {
                break;
            }
            let (item, size) = inner.queue.pop_front().expect("front present");
            taken += size;
            inner.bytes -= size;
            out.push(item);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn holds_at_most_the_capacity_or_one_larger_entry() {
        let b = RecordBuffer::new(100);
        assert!(b.try_offer(1, 60).is_ok());
        assert!(b.try_offer(2, 40).is_ok());
        assert_eq!(b.bytes(), 100);
        assert_eq!(b.try_offer(3, 1), Err(3));
        assert_eq!(b.drain(1_000, Duration::ZERO), vec![1, 2]);
        // An entry larger than the capacity goes in alone.
        assert!(b.try_offer(4, 250).is_ok());
        assert_eq!(b.try_offer(5, 1), Err(5));
        assert_eq!(b.bytes(), 250);
        // Control entries go in whatever the bytes held, and weigh nothing.
        b.push_control(6);
        assert_eq!((b.len(), b.bytes()), (2, 250));
        assert_eq!(b.drain(1_000, Duration::ZERO), vec![4, 6]);
        assert_eq!(b.bytes(), 0);
    }

    #[test]
    fn drain_takes_up_to_max_bytes_and_at_least_one_entry() {
        let b = RecordBuffer::new(1_000);
        for i in 0..10 {
            b.try_offer(i, 30).unwrap();
        }
        assert_eq!(b.drain(100, Duration::ZERO), vec![0, 1, 2]);
        assert_eq!(b.drain(10, Duration::ZERO), vec![3]);
        assert_eq!(b.drain(1_000, Duration::ZERO), vec![4, 5, 6, 7, 8, 9]);
        let t = Instant::now();
        assert!(b.drain(1_000, Duration::from_millis(50)).is_empty());
        assert!(t.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn offer_waits_for_room_then_times_out() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let b = RecordBuffer::new(10);
        b.try_offer(0, 10).unwrap();
        let t = Instant::now();
        let r = rt.block_on(b.offer(1, 5, Duration::from_millis(40), || true));
        assert_eq!(r, Err(1));
        assert!(t.elapsed() >= Duration::from_millis(40));
        // Not wanted any more: given back at once.
        let t = Instant::now();
        let r = rt.block_on(b.offer(1, 5, Duration::from_secs(5), || false));
        assert_eq!(r, Err(1));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(b.drain(100, Duration::ZERO), vec![0]);
        assert_eq!(
            rt.block_on(b.offer(1, 5, Duration::from_millis(40), || true)),
            Ok(())
        );
    }

    /// Producers filling as fast as they can and a slow consumer: the bytes held never pass the
    /// capacity plus one record, and every record arrives once, in order per producer.
    #[test]
    fn concurrent_producers_never_exceed_the_bound() {
        const CAP: usize = 1_000;
        const MAX_RECORD: usize = 300;
        let b = Arc::new(RecordBuffer::new(CAP));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let high = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let mut producers = Vec::new();
        for p in 0..3usize {
            let b = Arc::clone(&b);
            producers.push(rt.spawn(async move {
                for i in 0..200usize {
                    // Sizes from 1 to MAX_RECORD bytes.
                    let size = 1 + (i * 37 + p * 101) % MAX_RECORD;
                    let mut item = (p, i);
                    loop {
                        match b
                            .offer(item, size, Duration::from_millis(20), || true)
                            .await
                        {
                            Ok(()) => break,
                            Err(back) => item = back,
                        }
                    }
                }
            }));
        }
        let watcher = {
            let (b, high, done) = (Arc::clone(&b), Arc::clone(&high), Arc::clone(&done));
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    high.fetch_max(b.bytes(), Ordering::Relaxed);
                    std::thread::yield_now();
                }
            })
        };
        let mut next = [0usize; 3];
        let mut got = 0;
        while got < 600 {
            for (p, i) in b.drain(250, Duration::from_millis(100)) {
                assert_eq!(i, next[p], "producer {p} out of order");
                next[p] += 1;
                got += 1;
            }
            high.fetch_max(b.bytes(), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
        done.store(true, Ordering::Relaxed);
        watcher.join().unwrap();
        for p in producers {
            rt.block_on(p).unwrap();
        }
        let high = high.load(Ordering::Relaxed);
        assert!(high <= CAP, "held {high} bytes with a capacity of {CAP}");
        assert!(
            high > CAP / 2,
            "the producers never filled the buffer ({high})"
        );
        assert_eq!(b.bytes(), 0);
    }
}
