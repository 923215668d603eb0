//! The devices' compiled-kernel caches: least-recently-used maps of bounded size, so that a
//! process compiling many programs (a fuzzer, a library user specialising programs) keeps at
//! most [`DEFAULT_CAPACITY`] kernels' code alive per device instead of all of them.

use std::collections::HashMap;
use std::hash::Hash;

/// Kernels a device's cache holds by default (see `CpuDevice::set_cache_capacity`).
pub const DEFAULT_CAPACITY: usize = 256;

/// A map that forgets its least recently used entry when it grows past its capacity.
pub(crate) struct Lru<K, V> {
    map: HashMap<K, (V, u64)>,
    tick: u64,
    capacity: usize,
}

impl<K, V> Default for Lru<K, V> {
    fn default() -> Self {
        Lru {
            map: HashMap::new(),
            tick: 0,
            capacity: DEFAULT_CAPACITY,
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Lru<K, V> {
    /// The value of `k`, marked as just used.
    pub(crate) fn get(&mut self, k: &K) -> Option<V> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(k).map(|(v, t)| {
            *t = tick;
            v.clone()
        })
    }

    /// The value of `k` if present (marked as used), else `v` inserted (evicting the least
    /// recently used entries beyond the capacity).
    pub(crate) fn get_or_insert(&mut self, k: K, v: V) -> V {
        if let Some(old) = self.get(&k) {
            return old;
        }
        self.map.insert(k, (v.clone(), self.tick));
        self.evict();
        v
    }

    fn evict(&mut self) {
        while self.map.len() > self.capacity.max(1) {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            else {
                return;
            };
            self.map.remove(&oldest);
        }
    }

    /// Whether `k` has an entry (not marking it used).
    pub(crate) fn contains(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Forgets every entry.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }

    /// The most entries held (at least 1).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity.max(1)
    }

    /// Sets the capacity, evicting the least recently used entries beyond it.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut c: Lru<u32, u32> = Lru::default();
        c.set_capacity(2);
        c.get_or_insert(1, 10);
        c.get_or_insert(2, 20);
        assert_eq!(c.get(&1), Some(10));
        c.get_or_insert(3, 30);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&2), None, "2 was used least recently");
        assert_eq!(c.get(&1), Some(10));
        assert_eq!(c.get_or_insert(3, 31), 30, "an entry present is kept");
        c.set_capacity(1);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&3), Some(30));
    }
}
