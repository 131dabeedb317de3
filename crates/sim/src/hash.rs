//! The stable hash: FNV-1a's xor-multiply step over 64-bit words.
//!
//! `std`'s `DefaultHasher` is randomly keyed per process and may change between releases,
//! so it can never name a trace. [`StableHasher`] implements [`std::hash::Hasher`] with
//! the FNV-1a 64 constants (offset basis 0xcbf29ce484222325, prime 0x100000001b3), one
//! step per word rather than per byte, which is several times faster on the trace's hot
//! path (measured in docs/PERFORMANCE.md):
//! - every integer write (u8 to u64, and `usize`/`isize` widened to 64 bits) is one word:
//!   `h = (h ^ value) * prime`; u128 is two words, low first;
//! - a byte slice is its 8-byte little-endian chunks, one word each, then the remaining
//!   bytes one word each, then its length as one word (so "ab" + "c" and "a" + "bc"
//!   differ).
//!
//! So a value whose `Hash` impl is derived hashes the same on every machine and pointer
//! width.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bit, with a platform-independent integer encoding.
#[derive(Clone, Copy, Debug)]
pub struct StableHasher(u64);

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher(FNV_OFFSET)
    }
}

impl StableHasher {
    pub fn new() -> Self {
        Self::default()
    }

    /// One xor-multiply step.
    #[inline]
    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(FNV_PRIME);
    }

    /// Hash one value from a fresh state.
    pub fn hash_one<T: Hash + ?Sized>(value: &T) -> u64 {
        let mut h = StableHasher::new();
        value.hash(&mut h);
        h.finish()
    }
}

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.word(u64::from(b));
        }
        self.word(bytes.len() as u64);
    }

    fn write_u8(&mut self, i: u8) {
        self.word(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.word(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.word(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.word(i);
    }
    fn write_u128(&mut self, i: u128) {
        self.word(i as u64);
        self.word((i >> 64) as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_i8(&mut self, i: i8) {
        self.write_u8(i as u8);
    }
    fn write_i16(&mut self, i: i16) {
        self.write_u16(i as u16);
    }
    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }
    fn write_i128(&mut self, i: i128) {
        self.write_u128(i as u128);
    }
    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as i64 as u64);
    }
}

/// A value shared by reference count, hashed as its stable hash, computed once.
///
/// A payload that many messages carry (a cloud instance in every DescribeInstances answer)
/// is hashed into the trace as one word, not field by field per message (issue 33). It is
/// read through `Deref` and written only through [`Hashed::make_mut`], which copies it
/// first if it is shared and forgets the hash: a stale hash cannot be represented.
/// Equality, `Debug` and `Serialize` are the value's own.
pub struct Hashed<T>(Arc<HashedInner<T>>);

struct HashedInner<T> {
    digest: OnceLock<u64>,
    value: T,
}

impl<T> Hashed<T> {
    pub fn new(value: T) -> Self {
        Hashed(Arc::new(HashedInner {
            digest: OnceLock::new(),
            value,
        }))
    }

    /// Whether `a` and `b` share one value (so they are equal).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The value to write: copied first if shared, its hash forgotten.
    pub fn make_mut(this: &mut Self) -> &mut T
    where
        T: Clone,
    {
        if Arc::get_mut(&mut this.0).is_none() {
            *this = Hashed::new(this.0.value.clone());
        }
        let inner = Arc::get_mut(&mut this.0).expect("just made unique");
        inner.digest = OnceLock::new();
        &mut inner.value
    }
}

impl<T: Hash> Hashed<T> {
    /// The value's stable hash ([`StableHasher::hash_one`]), computed on first use.
    pub fn digest(&self) -> u64 {
        *self
            .0
            .digest
            .get_or_init(|| StableHasher::hash_one(&self.0.value))
    }
}

impl<T> Clone for Hashed<T> {
    fn clone(&self) -> Self {
        Hashed(Arc::clone(&self.0))
    }
}

impl<T> Deref for Hashed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T> From<T> for Hashed<T> {
    fn from(value: T) -> Self {
        Hashed::new(value)
    }
}

impl<T: Hash> Hash for Hashed<T> {
    /// One word, the value's digest, whatever the hasher.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest());
    }
}

impl<T: PartialEq> PartialEq for Hashed<T> {
    fn eq(&self, other: &Self) -> bool {
        Hashed::ptr_eq(self, other) || self.0.value == other.0.value
    }
}

impl<T: Eq> Eq for Hashed<T> {}

impl<T: fmt::Debug> fmt::Debug for Hashed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}

impl<T: serde::Serialize> serde::Serialize for Hashed<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_follow_the_documented_steps() {
        let step = |h: u64, w: u64| (h ^ w).wrapping_mul(FNV_PRIME);
        let mut h = StableHasher::new();
        h.write_u32(7);
        assert_eq!(h.finish(), step(FNV_OFFSET, 7));
        let mut h = StableHasher::new();
        h.write(b"abcdefghi");
        let first = u64::from_le_bytes(*b"abcdefgh");
        let expect = step(step(step(FNV_OFFSET, first), u64::from(b'i')), 9);
        assert_eq!(h.finish(), expect);
        // Pinned: a change of the algorithm breaks every saved failure file.
        assert_eq!(StableHasher::hash_one("reconsim"), 0xd832_1235_bcfc_4de8);
    }

    #[test]
    fn split_points_matter() {
        let mut a = StableHasher::new();
        a.write(b"ab");
        a.write(b"c");
        let mut b = StableHasher::new();
        b.write(b"a");
        b.write(b"bc");
        assert_ne!(a.finish(), b.finish());
    }

    #[test]
    fn usize_hashes_as_u64() {
        assert_eq!(
            StableHasher::hash_one(&7usize),
            StableHasher::hash_one(&7u64)
        );
    }

    #[test]
    fn a_hashed_value_hashes_as_its_digest_and_a_write_forgets_it() {
        let mut a = Hashed::new(vec![1u32, 2, 3]);
        let b = a.clone();
        assert_eq!(a.digest(), StableHasher::hash_one(&vec![1u32, 2, 3]));
        let mut h = StableHasher::new();
        h.write_u64(a.digest());
        assert_eq!(StableHasher::hash_one(&a), h.finish());
        // A write to a shared value copies it: `b` keeps the old value and digest.
        Hashed::make_mut(&mut a).push(4);
        assert_eq!(*b, vec![1, 2, 3]);
        assert_eq!(b.digest(), StableHasher::hash_one(&vec![1u32, 2, 3]));
        assert_eq!(a.digest(), StableHasher::hash_one(&vec![1u32, 2, 3, 4]));
        assert_ne!(a, b);
        // A write to an unshared value whose digest was taken forgets it.
        drop(b);
        Hashed::make_mut(&mut a).pop();
        assert_eq!(a.digest(), StableHasher::hash_one(&vec![1u32, 2, 3]));
        assert_eq!(format!("{a:?}"), "[1, 2, 3]");
    }
}
