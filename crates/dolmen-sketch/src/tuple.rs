//! Apache DataSketches tuple sketch of type *ArrayOfDoubles*: a theta sketch whose retained keys
//! each carry an array of `numValues` doubles. It is the state of Druid's
//! `arrayOfDoublesSketch` aggregator (`COMPLEX<arrayOfDoublesSketch>`, SQL `DS_TUPLE_DOUBLES`).
//!
//! The `datasketches` crate's tuple sketch is generic over a summary type and writes the C++
//! generic tuple format (sketch type 1, serial version 3); Druid reads and writes the Java
//! *ArrayOfDoubles* format instead, so this is a Rust implementation written from the reference
//! sources, datasketches-java `org.apache.datasketches.tuple.arrayofdoubles`:
//! `ArrayOfDoublesSketch` (common preamble), `ArrayOfDoublesCompactSketch` /
//! `HeapArrayOfDoublesCompactSketch` (compact layout), `ArrayOfDoublesQuickSelectSketch` /
//! `HeapArrayOfDoublesQuickSelectSketch` (the update sketch: hash table, resizing, theta
//! rebuilds, updatable layout), `ArrayOfDoublesUpdatableSketch` (key hashing),
//! `ArrayOfDoublesUnion`, `ArrayOfDoublesIntersection` + `HashTables`, `ArrayOfDoublesAnotBImpl`,
//! and `thetacommon.HashOperations` (open addressing with double hashing). Druid's side is
//! `org.apache.druid.query.aggregation.datasketches.tuple` (`ArrayOfDoublesSketchBuildAggregator`,
//! `ArrayOfDoublesSketchOperations`, `ArrayOfDoublesSketchToMetricsSumEstimatePostAggregator`).
//!
//! # Hashing
//!
//! A key is hashed as Java's `ArrayOfDoublesUpdatableSketch.update(String, double[])`:
//! MurmurHash3 x64-128 of its UTF-8 bytes with the default seed 9001, keeping `h1 >>> 1` (a
//! 63-bit hash); null and empty keys are skipped. This is the same hash as theta sketches, so a
//! tuple sketch's keys match a theta sketch of the same strings. Only the default seed is
//! supported (seed hash `0x93CC`, Java's `Util.computeSeedHash(9001)`).
//!
//! # Algorithm
//!
//! The update sketch mirrors `HeapArrayOfDoublesQuickSelectSketch` step for step (starting
//! capacity, resize factor 8, the load thresholds 1/2 and 15/16, quick-select of the `k`-th
//! smallest hash as the new theta, the order of re-insertion), so for the same stream of keys it
//! retains the same entries in the same hash-table order as the Java library, and the compact
//! bytes are the same. Values of a key seen again are added to its array. Unions add the arrays
//! of keys present in several inputs, intersections add them too (Druid's `COMBINER` in
//! `ArrayOfDoublesSketchOperations`), and `A NOT B` keeps A's arrays.
//!
//! # Serialized forms (little-endian)
//!
//! Common first 16 bytes (`ArrayOfDoublesSketch`):
//!
//! | bytes | field |
//! |-------|-------|
//! | 0     | preamble longs, always 1 |
//! | 1     | serial version, 1 |
//! | 2     | family id, 9 (`TUPLE`) |
//! | 3     | sketch type: 2 `ArrayOfDoublesQuickSelectSketch`, 3 `ArrayOfDoublesCompactSketch` (ordinals of `SerializerDeserializer.SketchType`) |
//! | 4     | flags: bit 0 big-endian, bit 1 in sampling mode, bit 2 empty, bit 3 has entries |
//! | 5     | `numValues` |
//! | 6..8  | seed hash (`u16`) |
//! | 8..16 | theta as a long (`Long.MAX_VALUE` is theta 1.0) |
//!
//! Compact (type 3, what [`ArrayOfDoublesCompactSketch::to_bytes`] writes): when it has entries,
//! bytes 16..20 hold the count `n` (`u32`), 20..24 are zero, then `n` keys (`u64`) from byte 24,
//! then `n * numValues` values (`f64`), the values of each key together; otherwise the sketch is
//! the 16 preamble bytes alone. Keys are in hash-table order (not sorted), as Java writes them.
//!
//! Updatable (type 2, read only): byte 16 `lgNomEntries`, 17 `lgCurrentCapacity`, 18
//! `lgResizeFactor`, 20..24 sampling probability (`f32`), 24..28 retained count, then from byte 32
//! the whole hash table: `capacity` keys (0 = free slot) and `capacity * numValues` values.

use crate::SketchError;

/// Druid's default `nominalEntries` (`ThetaUtil.DEFAULT_NOMINAL_ENTRIES`).
pub const TUPLE_DEFAULT_NOMINAL_ENTRIES: u32 = 16384;
/// Smallest `nominalEntries` (theta's `MIN_LG_NOM_LONGS` = 4).
pub const TUPLE_MIN_NOMINAL_ENTRIES: u32 = 16;
/// Largest `nominalEntries` (theta's `MAX_LG_NOM_LONGS` = 26).
pub const TUPLE_MAX_NOMINAL_ENTRIES: u32 = 1 << 26;
/// Largest `numValues`: it is stored in one (signed, in Java) byte.
pub const TUPLE_MAX_NUM_VALUES: usize = 127;

/// Theta 1.0 as a long (`Long.MAX_VALUE`).
const MAX_THETA: u64 = i64::MAX as u64;
/// The default update seed (`ThetaUtil.DEFAULT_UPDATE_SEED`).
const DEFAULT_SEED: u64 = 9001;
/// `Util.computeSeedHash(9001)`: the low 16 bits of MurmurHash3 of the long 9001 with seed 0.
const DEFAULT_SEED_HASH: u16 = 0x93CC;
const SERIAL_VERSION: u8 = 1;
const FAMILY_TUPLE: u8 = 9;
const TYPE_QUICK_SELECT: u8 = 2;
const TYPE_COMPACT: u8 = 3;
const FLAG_BIG_ENDIAN: u8 = 1;
const FLAG_EMPTY: u8 = 1 << 2;
const FLAG_HAS_ENTRIES: u8 = 1 << 3;
/// Size of the common preamble, and of an empty compact sketch (`EMPTY_SIZE`).
const PREAMBLE_BYTES: usize = 16;
/// Where the keys start in the compact form (`ArrayOfDoublesCompactSketch.ENTRIES_START`).
const COMPACT_ENTRIES_START: usize = 24;
/// Where the hash table starts in the updatable form
/// (`ArrayOfDoublesQuickSelectSketch.ENTRIES_START`).
const QS_ENTRIES_START: usize = 32;
/// `ThetaUtil.MIN_LG_ARR_LONGS`: smallest hash table of an update sketch.
const MIN_LG_ARR_LONGS: u8 = 5;
/// `ThetaUtil.MIN_LG_NOM_LONGS`: smallest hash table of an intersection.
const MIN_LG_NOM_LONGS: u8 = 4;
/// `ArrayOfDoublesQuickSelectSketch.DEFAULT_LG_RESIZE_FACTOR` (resize factor 8).
const LG_RESIZE_FACTOR: u8 = 3;
/// `HashOperations.STRIDE_MASK`.
const STRIDE_MASK: u64 = (1 << 7) - 1;

/// Checks Druid's `nominalEntries`: a power of 2 in `16..=2^26`.
///
/// # Errors
/// [`SketchError::InvalidParameter`] naming `nominalEntries` otherwise.
pub fn check_nominal_entries(nominal_entries: i64) -> Result<u32, SketchError> {
    match u32::try_from(nominal_entries) {
        Ok(n)
            if n.is_power_of_two()
                && (TUPLE_MIN_NOMINAL_ENTRIES..=TUPLE_MAX_NOMINAL_ENTRIES).contains(&n) =>
        {
            Ok(n)
        }
        _ => Err(SketchError::InvalidParameter(format!(
            "nominalEntries must be a power of 2 between {TUPLE_MIN_NOMINAL_ENTRIES} and \
             {TUPLE_MAX_NOMINAL_ENTRIES}, got [{nominal_entries}]"
        ))),
    }
}

fn check_num_values(num_values: usize) -> Result<(), SketchError> {
    if (1..=TUPLE_MAX_NUM_VALUES).contains(&num_values) {
        Ok(())
    } else {
        Err(SketchError::InvalidParameter(format!(
            "numValues must be between 1 and {TUPLE_MAX_NUM_VALUES}, got [{num_values}]"
        )))
    }
}

/// The 63-bit hash of a key (`MurmurHash3.hash(bytes, 9001)[0] >>> 1`); `None` for an empty key,
/// which Java skips (`Util.stringToByteArray` gives null for it).
pub fn tuple_key_hash(key: &[u8]) -> Option<u64> {
    if key.is_empty() {
        return None;
    }
    // `fastmurmur3` returns `(h2 << 64) | h1`.
    let h1 = fastmurmur3::murmur3_x64_128(key, DEFAULT_SEED) as u64;
    Some(h1 >> 1)
}

// ---------------------------------------------------------------------------------------------
// Open-addressing hash table (`thetacommon.HashOperations`)
// ---------------------------------------------------------------------------------------------

/// Odd probe stride independent of the start slot (`HashOperations.getStride`).
fn stride(hash: u64, lg_size: u8) -> usize {
    (2 * ((hash >> lg_size) & STRIDE_MASK) + 1) as usize
}

/// `hashSearchOrInsert`: `Ok(slot)` when `hash` is present, `Err(slot)` where it was inserted.
/// The table must have a free slot.
fn search_or_insert(table: &mut [u64], lg_size: u8, hash: u64) -> Result<usize, usize> {
    let mask = table.len() - 1;
    let step = stride(hash, lg_size);
    let mut probe = (hash as usize) & mask;
    loop {
        let v = table[probe];
        if v == 0 {
            table[probe] = hash;
            return Err(probe);
        }
        if v == hash {
            return Ok(probe);
        }
        probe = (probe + step) & mask;
    }
}

/// `hashInsertOnly`: inserts a hash known to be absent; the table must have a free slot.
fn insert_only(table: &mut [u64], lg_size: u8, hash: u64) -> usize {
    match search_or_insert(table, lg_size, hash) {
        Ok(slot) | Err(slot) => slot,
    }
}

/// `hashSearch`: the slot holding `hash`, if any.
fn search(table: &[u64], lg_size: u8, hash: u64) -> Option<usize> {
    let mask = table.len() - 1;
    let step = stride(hash, lg_size);
    let start = (hash as usize) & mask;
    let mut probe = start;
    loop {
        let v = table[probe];
        if v == 0 {
            return None;
        }
        if v == hash {
            return Some(probe);
        }
        probe = (probe + step) & mask;
        if probe == start {
            return None;
        }
    }
}

/// The hash table of an update sketch or of a union (`HeapArrayOfDoublesQuickSelectSketch`,
/// sampling probability 1, resize factor 8).
#[derive(Debug, Clone)]
struct QuickSelectTable {
    lg_nom: u8,
    num_values: usize,
    theta: u64,
    empty: bool,
    count: usize,
    lg_cap: u8,
    /// `1 << lg_cap` slots, 0 = free.
    keys: Vec<u64>,
    /// `num_values` doubles per slot.
    values: Vec<f64>,
    rebuild_threshold: usize,
}

impl QuickSelectTable {
    fn new(nominal_entries: u32, num_values: usize) -> Self {
        let lg_nom = nominal_entries.trailing_zeros() as u8;
        // `Util.getStartingCapacity`: a sub-multiple of the target `2 * nominalEntries` by
        // powers of the resize factor, at least `2^MIN_LG_ARR_LONGS`.
        let lg_target = lg_nom + 1;
        let lg_cap = if lg_target <= MIN_LG_ARR_LONGS {
            MIN_LG_ARR_LONGS
        } else {
            (lg_target - MIN_LG_ARR_LONGS) % LG_RESIZE_FACTOR + MIN_LG_ARR_LONGS
        };
        let mut t = QuickSelectTable {
            lg_nom,
            num_values,
            theta: MAX_THETA,
            empty: true,
            count: 0,
            lg_cap,
            keys: vec![0; 1 << lg_cap],
            values: vec![0.0; (1 << lg_cap) * num_values],
            rebuild_threshold: 0,
        };
        t.set_rebuild_threshold();
        t
    }

    fn nominal(&self) -> usize {
        1 << self.lg_nom
    }

    fn capacity(&self) -> usize {
        self.keys.len()
    }

    /// `setRebuildThreshold`: 15/16 of a full-size table, 1/2 of a growing one.
    fn set_rebuild_threshold(&mut self) {
        let cap = self.capacity() as f64;
        self.rebuild_threshold = if self.capacity() > self.nominal() {
            (cap * 15.0 / 16.0) as usize
        } else {
            (cap * 0.5) as usize
        };
    }

    /// `insertOrIgnore`: a new update (hash 0 is impossible for real keys but ignored).
    fn insert_or_ignore(&mut self, key: u64, values: &[f64]) {
        self.empty = false;
        if key == 0 || key >= self.theta {
            return;
        }
        self.add(key, values);
    }

    /// `merge`: an entry of another sketch, from a union.
    fn merge(&mut self, key: u64, values: &[f64]) {
        self.empty = false;
        if key < self.theta {
            self.add(key, values);
        }
    }

    fn add(&mut self, key: u64, values: &[f64]) {
        let nv = self.num_values;
        match search_or_insert(&mut self.keys, self.lg_cap, key) {
            Err(slot) => {
                self.count += 1;
                self.values[slot * nv..(slot + 1) * nv].copy_from_slice(values);
            }
            Ok(slot) => {
                for (a, b) in self.values[slot * nv..(slot + 1) * nv]
                    .iter_mut()
                    .zip(values)
                {
                    *a += b;
                }
            }
        }
        self.rebuild_if_needed();
    }

    /// `rebuildIfNeeded`: past the threshold a full-size table lowers theta to the `k`-th
    /// smallest hash and drops the hashes above it; a growing table grows 8 times.
    fn rebuild_if_needed(&mut self) {
        if self.count <= self.rebuild_threshold {
            return;
        }
        if self.capacity() > self.nominal() {
            self.theta = self.new_theta();
            self.rebuild(self.capacity());
        } else {
            self.rebuild(self.capacity() << LG_RESIZE_FACTOR);
        }
    }

    /// `getNewThetaLong`: the `k`-th smallest retained hash (0-based index `k`); the table must
    /// hold more than `k` hashes.
    fn new_theta(&self) -> u64 {
        let mut keys: Vec<u64> = self.keys.iter().copied().filter(|k| *k != 0).collect();
        let k = self.nominal();
        *keys.select_nth_unstable(k).1
    }

    /// `rebuild(newCapacity)`: re-inserts the hashes below theta, in slot order.
    fn rebuild(&mut self, new_capacity: usize) {
        let nv = self.num_values;
        let old_keys = std::mem::replace(&mut self.keys, vec![0; new_capacity]);
        let old_values = std::mem::replace(&mut self.values, vec![0.0; new_capacity * nv]);
        self.lg_cap = new_capacity.trailing_zeros() as u8;
        self.count = 0;
        for (i, &key) in old_keys.iter().enumerate() {
            if key != 0 && key < self.theta {
                let slot = insert_only(&mut self.keys, self.lg_cap, key);
                self.values[slot * nv..(slot + 1) * nv]
                    .copy_from_slice(&old_values[i * nv..(i + 1) * nv]);
                self.count += 1;
            }
        }
        self.set_rebuild_threshold();
    }

    /// `getThetaLong`: 1.0 while empty.
    fn theta_long(&self) -> u64 {
        if self.empty { MAX_THETA } else { self.theta }
    }

    /// `new HeapArrayOfDoublesCompactSketch(sketch, thetaLong)`: the entries below
    /// `min(theta, limit)`, in slot order.
    fn compact(&self, limit: u64) -> ArrayOfDoublesCompactSketch {
        let theta = self.theta_long().min(limit);
        let nv = self.num_values;
        let mut keys = Vec::with_capacity(self.count);
        let mut values = Vec::with_capacity(self.count * nv);
        for (i, &key) in self.keys.iter().enumerate() {
            if key != 0 && key < theta {
                keys.push(key);
                values.extend_from_slice(&self.values[i * nv..(i + 1) * nv]);
            }
        }
        ArrayOfDoublesCompactSketch {
            num_values: nv,
            empty: self.empty,
            theta,
            keys,
            values,
        }
    }

    fn memory_size(&self) -> usize {
        self.keys.len() * 8 + self.values.len() * 8
    }
}

// ---------------------------------------------------------------------------------------------
// Update sketch
// ---------------------------------------------------------------------------------------------

/// An updatable ArrayOfDoubles sketch (Java `ArrayOfDoublesUpdatableSketch` built with
/// `nominalEntries` and `numberOfValues`), what Druid's `ArrayOfDoublesSketchBuildAggregator`
/// fills from a key column and metric columns.
#[derive(Debug, Clone)]
pub struct ArrayOfDoublesUpdateSketch {
    table: QuickSelectTable,
}

impl ArrayOfDoublesUpdateSketch {
    /// An empty sketch of `nominal_entries` (see [`check_nominal_entries`]) keeping
    /// `num_values` (1..=127) doubles per key.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `nominalEntries` or `numValues`.
    pub fn new(nominal_entries: u32, num_values: usize) -> Result<Self, SketchError> {
        check_nominal_entries(i64::from(nominal_entries))?;
        check_num_values(num_values)?;
        Ok(ArrayOfDoublesUpdateSketch {
            table: QuickSelectTable::new(nominal_entries, num_values),
        })
    }

    /// Adds `values` (exactly `num_values` of them) to the array of the string `key`, hashed as
    /// its UTF-8 bytes; an empty key is skipped and leaves the sketch as it was.
    ///
    /// # Panics
    /// When `values.len() != num_values` (a caller bug; Java throws).
    pub fn update_str(&mut self, key: &str, values: &[f64]) {
        if let Some(hash) = tuple_key_hash(key.as_bytes()) {
            self.update_hash(hash, values);
        }
    }

    /// Adds `values` to the array of the key whose hash is `hash` (see [`tuple_key_hash`]).
    ///
    /// # Panics
    /// When `values.len() != num_values`.
    pub fn update_hash(&mut self, hash: u64, values: &[f64]) {
        assert_eq!(values.len(), self.table.num_values, "values per key");
        self.table.insert_or_ignore(hash, values);
    }

    /// Doubles kept per key.
    pub fn num_values(&self) -> usize {
        self.table.num_values
    }

    /// The configured nominal entries `k`.
    pub fn nominal_entries(&self) -> u32 {
        1 << self.table.lg_nom
    }

    /// True until the first non-empty key.
    pub fn is_empty(&self) -> bool {
        self.table.empty
    }

    /// Entries currently held (may exceed `k` by up to 15/16 of `2k` before a rebuild).
    pub fn num_retained(&self) -> usize {
        self.table.count
    }

    /// The compact form (Java `compact()`): every retained entry below theta.
    pub fn compact(&self) -> ArrayOfDoublesCompactSketch {
        self.table.compact(MAX_THETA)
    }

    /// Approximate heap bytes held; cheap, for memory accounting.
    pub fn memory_size(&self) -> usize {
        self.table.memory_size()
    }
}

// ---------------------------------------------------------------------------------------------
// Compact sketch
// ---------------------------------------------------------------------------------------------

/// An immutable ArrayOfDoubles sketch: retained hashes with their value arrays and theta (Java
/// `ArrayOfDoublesCompactSketch`); what is serialized and what the set operations produce.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayOfDoublesCompactSketch {
    num_values: usize,
    empty: bool,
    /// Theta as a long; `MAX_THETA` is 1.0.
    theta: u64,
    keys: Vec<u64>,
    /// `num_values` doubles per key, in key order.
    values: Vec<f64>,
}

impl ArrayOfDoublesCompactSketch {
    /// The empty sketch with `num_values` doubles per key (what an aggregation over no rows
    /// gives).
    pub fn empty(num_values: usize) -> Self {
        ArrayOfDoublesCompactSketch {
            num_values,
            empty: true,
            theta: MAX_THETA,
            keys: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Doubles per key.
    pub fn num_values(&self) -> usize {
        self.num_values
    }

    /// True when nothing was ever added (Java `isEmpty()`); a non-empty sketch may still retain
    /// no entries.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Theta as a long (`getThetaLong()`: `i64::MAX` for theta 1.0, and for empty sketches).
    pub fn theta_long(&self) -> u64 {
        if self.empty { MAX_THETA } else { self.theta }
    }

    /// Theta in `(0, 1]`: the fraction of the hash space the retained keys sample.
    pub fn theta(&self) -> f64 {
        self.theta_long() as f64 / MAX_THETA as f64
    }

    /// Whether theta is below 1 (the sketch samples).
    pub fn is_estimation_mode(&self) -> bool {
        self.theta_long() < MAX_THETA && !self.empty
    }

    /// Number of retained keys.
    pub fn num_retained(&self) -> usize {
        self.keys.len()
    }

    /// The retained hashes, in stored order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The value array of the `i`-th retained key.
    pub fn values_at(&self, i: usize) -> &[f64] {
        &self.values[i * self.num_values..(i + 1) * self.num_values]
    }

    /// The distinct-key estimate (`getEstimate()`): the retained count, divided by theta in
    /// estimation mode.
    pub fn estimate(&self) -> f64 {
        if self.is_estimation_mode() {
            self.keys.len() as f64 / self.theta()
        } else {
            self.keys.len() as f64
        }
    }

    /// Per value column, the sum of the retained values divided by theta: an estimate of the
    /// column's total over all keys (Druid's
    /// `ArrayOfDoublesSketchToMetricsSumEstimatePostAggregator`, summing in stored order).
    pub fn metrics_sum_estimates(&self) -> Vec<f64> {
        let mut sums = vec![0.0; self.num_values];
        for row in self.values.chunks_exact(self.num_values) {
            for (s, v) in sums.iter_mut().zip(row) {
                *s += v;
            }
        }
        let theta = self.theta();
        sums.into_iter().map(|s| s / theta).collect()
    }

    /// The compact serialized form (`HeapArrayOfDoublesCompactSketch.toByteArray()`; see the
    /// module docs), readable by `ArrayOfDoublesSketches.wrapSketch`/`heapifySketch`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.keys.len();
        let size = if n == 0 {
            PREAMBLE_BYTES
        } else {
            COMPACT_ENTRIES_START + 8 * n + 8 * self.num_values * n
        };
        let mut out = Vec::with_capacity(size);
        out.push(1); // preamble longs
        out.push(SERIAL_VERSION);
        out.push(FAMILY_TUPLE);
        out.push(TYPE_COMPACT);
        let mut flags = 0;
        if self.empty {
            flags |= FLAG_EMPTY;
        }
        if n > 0 {
            flags |= FLAG_HAS_ENTRIES;
        }
        out.push(flags);
        out.push(self.num_values as u8);
        out.extend_from_slice(&DEFAULT_SEED_HASH.to_le_bytes());
        out.extend_from_slice(&self.theta.to_le_bytes());
        if n > 0 {
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&[0; 4]);
            for k in &self.keys {
                out.extend_from_slice(&k.to_le_bytes());
            }
            for v in &self.values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        debug_assert_eq!(out.len(), size);
        out
    }

    /// Reads a serialized ArrayOfDoubles sketch: the compact form (type 3) or the updatable
    /// form (type 2, `ArrayOfDoublesQuickSelectSketch.toByteArray()`), as
    /// `ArrayOfDoublesSketches.heapifySketch` does with the default seed.
    ///
    /// # Errors
    /// [`SketchError::InvalidBytes`] for anything else: another family or sketch type, another
    /// serial version or seed, big-endian data, or too few bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SketchError> {
        let bad = |m: String| Err(SketchError::InvalidBytes(m));
        if bytes.len() < PREAMBLE_BYTES {
            return bad(format!(
                "a tuple sketch has at least {PREAMBLE_BYTES} bytes, got {}",
                bytes.len()
            ));
        }
        if bytes[2] != FAMILY_TUPLE {
            return bad(format!("family id {} is not 9 (TUPLE)", bytes[2]));
        }
        if bytes[0] != 1 {
            return bad(format!("preamble longs {} is not 1", bytes[0]));
        }
        if bytes[1] != SERIAL_VERSION {
            return bad(format!("serial version {} is not 1", bytes[1]));
        }
        let flags = bytes[4];
        let num_values = usize::from(bytes[5]);
        if !(1..=TUPLE_MAX_NUM_VALUES).contains(&num_values) {
            return bad(format!("numValues {num_values} out of range"));
        }
        let seed_hash = u16::from_le_bytes([bytes[6], bytes[7]]);
        if seed_hash != DEFAULT_SEED_HASH {
            return bad(format!(
                "seed hash {seed_hash:#06x} is not the default seed's {DEFAULT_SEED_HASH:#06x}"
            ));
        }
        let theta = u64_at(bytes, 8);
        if theta == 0 || theta > MAX_THETA {
            return bad(format!("theta {theta} out of range"));
        }
        let empty = flags & FLAG_EMPTY != 0;
        let has_entries = flags & FLAG_HAS_ENTRIES != 0;
        let mut sketch = ArrayOfDoublesCompactSketch {
            num_values,
            empty,
            theta,
            keys: Vec::new(),
            values: Vec::new(),
        };
        match bytes[3] {
            TYPE_COMPACT => {
                if !has_entries {
                    return Ok(sketch);
                }
                if bytes.len() < COMPACT_ENTRIES_START {
                    return bad("truncated compact tuple sketch".into());
                }
                let n = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as usize;
                let need = COMPACT_ENTRIES_START as u64 + 8 * (n as u64) * (1 + num_values as u64);
                if (bytes.len() as u64) < need {
                    return bad(format!(
                        "compact tuple sketch of {n} entries needs {need} bytes, got {}",
                        bytes.len()
                    ));
                }
                let values_at = COMPACT_ENTRIES_START + 8 * n;
                sketch.keys = (0..n)
                    .map(|i| u64_at(bytes, COMPACT_ENTRIES_START + 8 * i))
                    .collect();
                sketch.values = (0..n * num_values)
                    .map(|i| f64::from_bits(u64_at(bytes, values_at + 8 * i)))
                    .collect();
            }
            TYPE_QUICK_SELECT => {
                if flags & FLAG_BIG_ENDIAN != 0 {
                    return bad("big-endian tuple sketch".into());
                }
                if bytes.len() < QS_ENTRIES_START {
                    return bad("truncated updatable tuple sketch".into());
                }
                let lg_cap = bytes[17];
                if lg_cap > 30 {
                    return bad(format!("lgCurrentCapacity {lg_cap} out of range"));
                }
                let cap = 1usize << lg_cap;
                let count = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
                if !has_entries || count == 0 {
                    return Ok(sketch);
                }
                let need = QS_ENTRIES_START as u64 + 8 * (cap as u64) * (1 + num_values as u64);
                if (bytes.len() as u64) < need {
                    return bad(format!(
                        "updatable tuple sketch of capacity {cap} needs {need} bytes, got {}",
                        bytes.len()
                    ));
                }
                let values_at = QS_ENTRIES_START + 8 * cap;
                for slot in 0..cap {
                    let key = u64_at(bytes, QS_ENTRIES_START + 8 * slot);
                    if key == 0 {
                        continue;
                    }
                    sketch.keys.push(key);
                    for j in 0..num_values {
                        let at = values_at + 8 * (slot * num_values + j);
                        sketch.values.push(f64::from_bits(u64_at(bytes, at)));
                    }
                }
            }
            other => {
                return bad(format!(
                    "sketch type {other} is not an ArrayOfDoubles sketch (2 or 3)"
                ));
            }
        }
        Ok(sketch)
    }

    fn check_same_num_values(&self, other: &Self) -> Result<(), SketchError> {
        if self.num_values != other.num_values {
            return Err(SketchError::InvalidParameter(format!(
                "tuple sketches of different numValues: {} and {}",
                self.num_values, other.num_values
            )));
        }
        Ok(())
    }

    /// The intersection of `sketches` (at least one), adding the arrays of matching keys
    /// (`ArrayOfDoublesIntersection` with Druid's summing combiner): the keys present in every
    /// sketch below the smallest theta. Empty if any input is empty.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] for no sketches, or non-empty sketches of different
    /// `numValues`.
    pub fn intersect(sketches: &[&Self]) -> Result<Self, SketchError> {
        let Some(first) = sketches.first() else {
            return Err(SketchError::InvalidParameter(
                "an intersection needs at least one sketch".into(),
            ));
        };
        let num_values = first.num_values;
        let mut theta = MAX_THETA;
        let mut table: Option<IntersectTable> = None;
        for s in sketches {
            if s.empty {
                // The empty rule: the result is empty, whatever else comes.
                return Ok(Self::empty(num_values));
            }
            if s.num_values != num_values {
                return Err(SketchError::InvalidParameter(format!(
                    "tuple sketches of different numValues: {num_values} and {}",
                    s.num_values
                )));
            }
            theta = theta.min(s.theta_long());
            table = Some(match table {
                None => IntersectTable::from_entries(
                    num_values,
                    s.keys
                        .iter()
                        .copied()
                        .zip(s.values.chunks_exact(num_values)),
                    s.keys.len(),
                ),
                Some(t) if t.num_keys == 0 => t,
                Some(t) => t.intersect(s, theta),
            });
        }
        let t = table.expect("at least one non-empty sketch");
        let mut out = ArrayOfDoublesCompactSketch {
            num_values,
            empty: false,
            theta,
            keys: Vec::with_capacity(t.num_keys),
            values: Vec::with_capacity(t.num_keys * num_values),
        };
        for (slot, &key) in t.keys.iter().enumerate() {
            // `getResult` skips `hash > thetaLong`.
            if key == 0 || key > theta {
                continue;
            }
            out.keys.push(key);
            out.values
                .extend_from_slice(&t.values[slot * num_values..(slot + 1) * num_values]);
        }
        Ok(out)
    }

    /// `a` minus the keys of `b` (`ArrayOfDoublesAnotBImpl`): A's entries below the smaller
    /// theta whose key is not in B, with A's arrays. An empty A gives an empty result, an empty
    /// B gives A.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] for non-empty sketches of different `numValues`.
    pub fn a_not_b(a: &Self, b: &Self) -> Result<Self, SketchError> {
        if a.empty {
            return Ok(Self::empty(a.num_values));
        }
        if b.empty {
            return Ok(a.clone());
        }
        a.check_same_num_values(b)?;
        let theta = a.theta_long().min(b.theta_long());
        let nv = a.num_values;
        let exclude: std::collections::HashSet<u64> =
            b.keys.iter().copied().filter(|k| *k < theta).collect();
        let mut out = ArrayOfDoublesCompactSketch {
            num_values: nv,
            empty: false,
            theta,
            keys: Vec::new(),
            values: Vec::new(),
        };
        for (i, &key) in a.keys.iter().enumerate() {
            if key == 0 || key >= theta || exclude.contains(&key) {
                continue;
            }
            out.keys.push(key);
            out.values.extend_from_slice(a.values_at(i));
        }
        // FULL_ANOTB: an exact result with nothing left is the empty set.
        out.empty = theta == MAX_THETA && out.keys.is_empty();
        Ok(out)
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// The hash and value tables of an intersection (`arrayofdoubles.HashTables`).
#[derive(Debug)]
struct IntersectTable {
    lg_size: u8,
    num_keys: usize,
    keys: Vec<u64>,
    values: Vec<f64>,
}

impl IntersectTable {
    /// `new HashTables(...)`: a table of at least `ceil(n / 0.75)` slots (a power of 2, at least
    /// 16), filled in the given order.
    fn from_entries<'a>(
        num_values: usize,
        entries: impl Iterator<Item = (u64, &'a [f64])>,
        n: usize,
    ) -> Self {
        let want = ((n as f64) / 0.75).ceil() as usize;
        let size = want.next_power_of_two().max(1 << MIN_LG_NOM_LONGS);
        let lg_size = size.trailing_zeros() as u8;
        let mut t = IntersectTable {
            lg_size,
            num_keys: n,
            keys: vec![0; size],
            values: vec![0.0; size * num_values],
        };
        for (key, vals) in entries {
            let slot = insert_only(&mut t.keys, lg_size, key);
            t.values[slot * num_values..(slot + 1) * num_values].copy_from_slice(vals);
        }
        t
    }

    /// `getIntersectHashTables`: the entries of `next` below `theta` found here, values summed,
    /// in `next`'s order.
    fn intersect(&self, next: &ArrayOfDoublesCompactSketch, theta: u64) -> Self {
        let nv = next.num_values;
        let mut matched: Vec<(u64, Vec<f64>)> = Vec::new();
        for (i, &key) in next.keys.iter().enumerate() {
            if key >= theta {
                continue;
            }
            let Some(slot) = search(&self.keys, self.lg_size, key) else {
                continue;
            };
            let sum: Vec<f64> = self.values[slot * nv..(slot + 1) * nv]
                .iter()
                .zip(next.values_at(i))
                .map(|(a, b)| a + b)
                .collect();
            matched.push((key, sum));
        }
        let n = matched.len();
        IntersectTable::from_entries(nv, matched.iter().map(|(k, v)| (*k, v.as_slice())), n)
    }
}

// ---------------------------------------------------------------------------------------------
// Union
// ---------------------------------------------------------------------------------------------

/// A union of ArrayOfDoubles sketches (`ArrayOfDoublesUnion`): the arrays of keys present in
/// several inputs are added; the result keeps at most `nominalEntries` keys.
///
/// `numValues` may be fixed up front or taken from the first non-empty sketch (Druid's merge
/// aggregator and set operations assume 1 unless told; taking it from the data lets sketches of
/// any width merge). Empty sketches are ignored whatever their `numValues`.
#[derive(Debug, Clone)]
pub struct ArrayOfDoublesUnion {
    nominal_entries: u32,
    /// Created with the first non-empty sketch when `numValues` was not given.
    gadget: Option<QuickSelectTable>,
    union_theta: u64,
    /// `numValues` of the result while no gadget exists.
    default_num_values: usize,
}

impl ArrayOfDoublesUnion {
    /// An empty union of `nominal_entries` (see [`check_nominal_entries`]); `num_values` fixes
    /// the width of the inputs, `None` takes it from the first non-empty one.
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] naming `nominalEntries` or `numValues`.
    pub fn new(nominal_entries: u32, num_values: Option<usize>) -> Result<Self, SketchError> {
        check_nominal_entries(i64::from(nominal_entries))?;
        if let Some(nv) = num_values {
            check_num_values(nv)?;
        }
        Ok(ArrayOfDoublesUnion {
            nominal_entries,
            gadget: num_values.map(|nv| QuickSelectTable::new(nominal_entries, nv)),
            union_theta: MAX_THETA,
            default_num_values: num_values.unwrap_or(1),
        })
    }

    /// Adds `sketch` (`ArrayOfDoublesUnion.union`).
    ///
    /// # Errors
    /// [`SketchError::InvalidParameter`] when a non-empty `sketch` has another `numValues`
    /// than the union.
    pub fn update(&mut self, sketch: &ArrayOfDoublesCompactSketch) -> Result<(), SketchError> {
        if sketch.empty {
            if self.gadget.is_none() {
                self.default_num_values = sketch.num_values;
            }
            return Ok(());
        }
        let nominal = self.nominal_entries;
        let gadget = self
            .gadget
            .get_or_insert_with(|| QuickSelectTable::new(nominal, sketch.num_values));
        if gadget.num_values != sketch.num_values {
            return Err(SketchError::InvalidParameter(format!(
                "tuple sketches of different numValues: {} and {}",
                gadget.num_values, sketch.num_values
            )));
        }
        gadget.empty = false;
        self.union_theta = self
            .union_theta
            .min(sketch.theta_long())
            .min(gadget.theta_long());
        for (i, &key) in sketch.keys.iter().enumerate() {
            if key < self.union_theta {
                gadget.merge(key, sketch.values_at(i));
            }
        }
        self.union_theta = self.union_theta.min(gadget.theta_long());
        Ok(())
    }

    /// Adds a serialized sketch (see [`ArrayOfDoublesCompactSketch::from_bytes`]).
    ///
    /// # Errors
    /// As [`ArrayOfDoublesCompactSketch::from_bytes`] and [`update`](Self::update).
    pub fn update_bytes(&mut self, bytes: &[u8]) -> Result<(), SketchError> {
        self.update(&ArrayOfDoublesCompactSketch::from_bytes(bytes)?)
    }

    /// The union so far (`getResult()`): trimmed to `nominalEntries` keys when it holds more.
    pub fn result(&self) -> ArrayOfDoublesCompactSketch {
        let Some(gadget) = &self.gadget else {
            return ArrayOfDoublesCompactSketch::empty(self.default_num_values);
        };
        let mut theta = self.union_theta;
        if gadget.count > gadget.nominal() {
            theta = theta.min(gadget.new_theta());
        }
        gadget.compact(theta)
    }

    /// Approximate heap bytes held; cheap, for memory accounting.
    pub fn memory_size(&self) -> usize {
        self.gadget
            .as_ref()
            .map_or(0, QuickSelectTable::memory_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("test vector is base64")
    }

    fn hash(s: &str) -> u64 {
        tuple_key_hash(s.as_bytes()).unwrap()
    }

    fn build(nominal: u32, keys: impl IntoIterator<Item = (String, Vec<f64>)>) -> Vec<u8> {
        let mut sk: Option<ArrayOfDoublesUpdateSketch> = None;
        for (k, v) in keys {
            sk.get_or_insert_with(|| ArrayOfDoublesUpdateSketch::new(nominal, v.len()).unwrap())
                .update_str(&k, &v);
        }
        sk.unwrap().compact().to_bytes()
    }

    fn sketch_of(keys: &[(&str, f64)]) -> ArrayOfDoublesCompactSketch {
        let mut s = ArrayOfDoublesUpdateSketch::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, 1).unwrap();
        for (k, v) in keys {
            s.update_str(k, &[*v]);
        }
        s.compact()
    }

    fn sorted_entries(s: &ArrayOfDoublesCompactSketch) -> Vec<(u64, Vec<f64>)> {
        let mut v: Vec<(u64, Vec<f64>)> = (0..s.num_retained())
            .map(|i| (s.keys()[i], s.values_at(i).to_vec()))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    #[test]
    fn golden_bytes_match_druid_test_sketches() {
        // Druid's ArrayOfDoublesSketchSqlAggregatorTest: "built from
        // ArrayOfDoublesUpdatableSketch.update("FEDCAB", new double[] {0.0}).compact()".
        // Layout per HeapArrayOfDoublesCompactSketch.toByteArray() and the offsets of
        // ArrayOfDoublesSketch (PREAMBLE_LONGS_BYTE 0, SERIAL_VERSION_BYTE 1, FAMILY_ID_BYTE 2,
        // SKETCH_TYPE_BYTE 3, FLAGS_BYTE 4, NUM_VALUES_BYTE 5, SEED_HASH_SHORT 6, THETA_LONG 8)
        // and ArrayOfDoublesCompactSketch (RETAINED_ENTRIES_INT 16, ENTRIES_START 24):
        //   01 01 09 03             preLongs 1, serVer 1, family 9 (TUPLE), type 3 (compact)
        //   08 01 cc93              flags HAS_ENTRIES (1 << 3), numValues 1, seed hash 0x93cc
        //   ffffffffffffff7f        thetaLong = Long.MAX_VALUE
        //   01000000 00000000       1 retained entry, 4 bytes padding
        //   8c59da759b8cae48        key: MurmurHash3("FEDCAB", 9001)[0] >>> 1
        //   0000000000000000        value 0.0
        let java = base64_decode("AQEJAwgBzJP/////////fwEAAAAAAAAAjFnadZuMrkgAAAAAAAAAAA==");
        let mut s = ArrayOfDoublesUpdateSketch::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, 1).unwrap();
        s.update_str("FEDCAB", &[0.0]);
        let ours = s.compact().to_bytes();
        assert_eq!(ours, java);
        assert_eq!(hash("FEDCAB"), 0x48ae_8c9b_75da_598c);

        // Same test, DS_TUPLE_DOUBLES_UNION(NULL, NULL): the empty union result, flags IS_EMPTY
        // (1 << 2), 16 bytes.
        let empty = ArrayOfDoublesUnion::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, Some(1))
            .unwrap()
            .result();
        assert_eq!(empty.to_bytes(), base64_decode("AQEJAwQBzJP/////////fw=="));

        // Same test, DS_TUPLE_DOUBLES(tuplesketch_dim2) unioned: FEDCAB (m1 5 + 3) and ABCDEF
        // (12 + 8 + 2), in the union gadget's hash-table order (64 slots: 0x0c then 0x3a).
        let java = base64_decode(
            "AQEJAwgBzJP/////////fwIAAAAAAAAAjFnadZuMrkg6WYAWZ8t1NgAAAAAAACBAAAAAAAAANkA=",
        );
        let mut seg = ArrayOfDoublesUpdateSketch::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, 1).unwrap();
        for (k, v) in [
            ("FEDCAB", 5.0),
            ("ABCDEF", 12.0),
            ("FEDCAB", 3.0),
            ("ABCDEF", 8.0),
            ("ABCDEF", 2.0),
        ] {
            seg.update_str(k, &[v]);
        }
        let mut u = ArrayOfDoublesUnion::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, None).unwrap();
        u.update(&seg.compact()).unwrap();
        assert_eq!(u.result().to_bytes(), java);
        let read = ArrayOfDoublesCompactSketch::from_bytes(&java).unwrap();
        assert_eq!(read.metrics_sum_estimates(), vec![30.0]);
        assert_eq!(read.estimate(), 2.0);
    }

    #[test]
    fn exact_mode_sums_values_per_key() {
        let mut s = ArrayOfDoublesUpdateSketch::new(1024, 2).unwrap();
        for i in 0..500 {
            s.update_str(&format!("k{}", i % 100), &[1.0, i as f64]);
        }
        s.update_str("", &[1000.0, 1000.0]);
        let c = s.compact();
        assert!(!c.is_estimation_mode());
        assert_eq!(c.num_retained(), 100);
        assert_eq!(c.estimate(), 100.0);
        assert_eq!(
            c.metrics_sum_estimates(),
            vec![500.0, (0..500).sum::<i32>() as f64]
        );
        // Key "k7" got 1.0 five times, and 7 + 107 + 207 + 307 + 407.
        let i = c.keys().iter().position(|k| *k == hash("k7")).unwrap();
        assert_eq!(c.values_at(i), &[5.0, 1035.0]);
    }

    #[test]
    fn empty_key_leaves_sketch_empty() {
        let mut s = ArrayOfDoublesUpdateSketch::new(16, 1).unwrap();
        s.update_str("", &[1.0]);
        assert!(s.is_empty());
        assert_eq!(s.compact(), ArrayOfDoublesCompactSketch::empty(1));
    }

    #[test]
    fn estimation_mode_within_a_few_percent() {
        let n = 100_000;
        let mut s = ArrayOfDoublesUpdateSketch::new(1024, 2).unwrap();
        for i in 0..n {
            s.update_str(&format!("user-{i}"), &[1.0, 2.0]);
        }
        let c = s.compact();
        assert!(c.is_estimation_mode());
        // Between k and 15/16 of 2k entries are retained before the next rebuild.
        assert!(
            (1024..=1920).contains(&c.num_retained()),
            "{}",
            c.num_retained()
        );
        let est = c.estimate();
        assert!((est - n as f64).abs() < 0.05 * n as f64, "{est}");
        let sums = c.metrics_sum_estimates();
        assert!((sums[0] - n as f64).abs() < 0.05 * n as f64, "{sums:?}");
        assert!(
            (sums[1] - 2.0 * n as f64).abs() < 0.1 * n as f64,
            "{sums:?}"
        );
        // A union trims to k entries and keeps the estimate.
        let mut u = ArrayOfDoublesUnion::new(1024, None).unwrap();
        u.update(&c).unwrap();
        let r = u.result();
        assert_eq!(r.num_retained(), 1024);
        assert!(
            (r.estimate() - n as f64).abs() < 0.05 * n as f64,
            "{}",
            r.estimate()
        );
        // Unioning two halves gives the same estimate quality.
        let mut a = ArrayOfDoublesUpdateSketch::new(1024, 1).unwrap();
        let mut b = ArrayOfDoublesUpdateSketch::new(1024, 1).unwrap();
        for i in 0..n {
            let side = if i % 2 == 0 { &mut a } else { &mut b };
            side.update_str(&format!("user-{i}"), &[1.0]);
        }
        let mut u = ArrayOfDoublesUnion::new(1024, Some(1)).unwrap();
        u.update(&a.compact()).unwrap();
        u.update(&b.compact()).unwrap();
        let r = u.result();
        let sum = r.metrics_sum_estimates()[0];
        assert!((sum - n as f64).abs() < 0.05 * n as f64, "{sum}");
    }

    #[test]
    fn set_operations_on_known_keys() {
        let a = sketch_of(&[("a", 1.0), ("b", 2.0), ("c", 3.0)]);
        let b = sketch_of(&[("b", 10.0), ("c", 20.0), ("d", 30.0)]);
        let c = sketch_of(&[("c", 100.0), ("e", 5.0)]);

        let mut u = ArrayOfDoublesUnion::new(TUPLE_DEFAULT_NOMINAL_ENTRIES, None).unwrap();
        for s in [&a, &b, &c] {
            u.update(s).unwrap();
        }
        let r = u.result();
        let mut expect = vec![
            (hash("a"), vec![1.0]),
            (hash("b"), vec![12.0]),
            (hash("c"), vec![123.0]),
            (hash("d"), vec![30.0]),
            (hash("e"), vec![5.0]),
        ];
        expect.sort_by_key(|e| e.0);
        assert_eq!(sorted_entries(&r), expect);

        let r = ArrayOfDoublesCompactSketch::intersect(&[&a, &b]).unwrap();
        let mut expect = vec![(hash("b"), vec![12.0]), (hash("c"), vec![23.0])];
        expect.sort_by_key(|e| e.0);
        assert_eq!(sorted_entries(&r), expect);
        let r = ArrayOfDoublesCompactSketch::intersect(&[&a, &b, &c]).unwrap();
        assert_eq!(sorted_entries(&r), vec![(hash("c"), vec![123.0])]);
        let none = sketch_of(&[("z", 1.0)]);
        let r = ArrayOfDoublesCompactSketch::intersect(&[&a, &none, &b]).unwrap();
        assert_eq!(r.num_retained(), 0);
        assert!(!r.is_empty());
        let r =
            ArrayOfDoublesCompactSketch::intersect(&[&a, &ArrayOfDoublesCompactSketch::empty(1)])
                .unwrap();
        assert!(r.is_empty());

        let r = ArrayOfDoublesCompactSketch::a_not_b(&a, &b).unwrap();
        assert_eq!(sorted_entries(&r), vec![(hash("a"), vec![1.0])]);
        let r = ArrayOfDoublesCompactSketch::a_not_b(&b, &a).unwrap();
        assert_eq!(sorted_entries(&r), vec![(hash("d"), vec![30.0])]);
        let r = ArrayOfDoublesCompactSketch::a_not_b(&a, &a).unwrap();
        assert!(r.is_empty(), "an exact A NOT A is the empty set");
        let r = ArrayOfDoublesCompactSketch::a_not_b(&a, &ArrayOfDoublesCompactSketch::empty(1))
            .unwrap();
        assert_eq!(r, a);

        // Mismatched widths are refused; empty sketches of any width are ignored by unions.
        let two = {
            let mut s = ArrayOfDoublesUpdateSketch::new(16, 2).unwrap();
            s.update_str("a", &[1.0, 2.0]);
            s.compact()
        };
        assert!(ArrayOfDoublesCompactSketch::intersect(&[&a, &two]).is_err());
        assert!(ArrayOfDoublesCompactSketch::a_not_b(&a, &two).is_err());
        let mut u = ArrayOfDoublesUnion::new(16, None).unwrap();
        u.update(&ArrayOfDoublesCompactSketch::empty(1)).unwrap();
        u.update(&two).unwrap();
        assert!(u.update(&a).is_err());
        assert_eq!(u.result().num_values(), 2);
    }

    #[test]
    fn set_operations_in_estimation_mode() {
        // A = 0..60000, B = 30000..90000, k = 4096: |A & B| = 30000, |A - B| = 30000.
        let sk = |r: std::ops::Range<i32>| {
            let mut s = ArrayOfDoublesUpdateSketch::new(4096, 1).unwrap();
            for i in r {
                s.update_str(&i.to_string(), &[1.0]);
            }
            s.compact()
        };
        let a = sk(0..60_000);
        let b = sk(30_000..90_000);
        let i = ArrayOfDoublesCompactSketch::intersect(&[&a, &b]).unwrap();
        assert!(
            (i.estimate() - 30_000.0).abs() < 0.1 * 30_000.0,
            "{}",
            i.estimate()
        );
        // Matching arrays are added: every surviving key has 1 + 1.
        assert!((i.metrics_sum_estimates()[0] - 60_000.0).abs() < 0.1 * 60_000.0);
        let d = ArrayOfDoublesCompactSketch::a_not_b(&a, &b).unwrap();
        assert!(
            (d.estimate() - 30_000.0).abs() < 0.1 * 30_000.0,
            "{}",
            d.estimate()
        );
        let mut u = ArrayOfDoublesUnion::new(4096, None).unwrap();
        u.update(&a).unwrap();
        u.update(&b).unwrap();
        let r = u.result();
        assert!(
            (r.estimate() - 90_000.0).abs() < 0.05 * 90_000.0,
            "{}",
            r.estimate()
        );
        // The overlap counts twice in the sum.
        let sum = r.metrics_sum_estimates()[0];
        assert!((sum - 120_000.0).abs() < 0.05 * 120_000.0, "{sum}");
    }

    #[test]
    fn serialization_round_trip() {
        let bytes = build(
            64,
            (0..1000).map(|i| (format!("key{i}"), vec![i as f64, -1.5, 0.25])),
        );
        let s = ArrayOfDoublesCompactSketch::from_bytes(&bytes).unwrap();
        assert_eq!(s.num_values(), 3);
        assert!(s.is_estimation_mode());
        assert_eq!(s.to_bytes(), bytes);
        assert_eq!(bytes.len(), 24 + s.num_retained() * (8 + 3 * 8));
        let e = ArrayOfDoublesCompactSketch::empty(3);
        assert_eq!(
            ArrayOfDoublesCompactSketch::from_bytes(&e.to_bytes()).unwrap(),
            e
        );
    }

    #[test]
    fn reads_the_updatable_form() {
        // HeapArrayOfDoublesQuickSelectSketch.serializeInto: the whole hash table from byte 32;
        // written here from the fields of a sketch (lgNom 4, capacity 32, 2 entries).
        let mut b = vec![1, 1, 9, 2, FLAG_HAS_ENTRIES, 1, 0xcc, 0x93];
        b.extend_from_slice(&MAX_THETA.to_le_bytes());
        b.extend_from_slice(&[4, 5, 3, 0]);
        b.extend_from_slice(&1.0f32.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        let mut keys = vec![0u64; 32];
        let mut vals = vec![0f64; 32];
        keys[3] = hash("x");
        vals[3] = 4.0;
        keys[17] = hash("y");
        vals[17] = 6.0;
        for k in &keys {
            b.extend_from_slice(&k.to_le_bytes());
        }
        for v in &vals {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let s = ArrayOfDoublesCompactSketch::from_bytes(&b).unwrap();
        assert_eq!(s.keys(), &[hash("x"), hash("y")]);
        assert_eq!(s.metrics_sum_estimates(), vec![10.0]);
    }

    #[test]
    fn bad_bytes_and_parameters_are_errors() {
        let good = build(16, [("a".to_string(), vec![1.0])]);
        for bad in [
            &b""[..],
            &good[..10],
            &good[..30],
            &[3, 3, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
        ] {
            assert!(ArrayOfDoublesCompactSketch::from_bytes(bad).is_err());
        }
        let mut other_seed = good.clone();
        other_seed[6] = 0;
        assert!(ArrayOfDoublesCompactSketch::from_bytes(&other_seed).is_err());
        let mut other_type = good.clone();
        other_type[3] = 1;
        assert!(ArrayOfDoublesCompactSketch::from_bytes(&other_type).is_err());
        for n in [0, 8, 1000, 1 << 27, -16] {
            let e = check_nominal_entries(n).unwrap_err().to_string();
            assert!(e.contains("nominalEntries"), "{e}");
        }
        assert_eq!(check_nominal_entries(16).unwrap(), 16);
        assert!(ArrayOfDoublesUpdateSketch::new(16, 0).is_err());
        assert!(ArrayOfDoublesUpdateSketch::new(16, 128).is_err());
    }
}
