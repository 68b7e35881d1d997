//! A vector whose copies share its elements in chunks of 64: copying it costs a pointer per
//! chunk, and changing one element copies only that element's chunk. An update of one tenant
//! among 10,000 copies the engine's per-tenant vectors this way instead of element by element.
//! [`GroupedVec`] shares the chunks in groups of 64 too, for the vectors the data path does not
//! read: a copy costs a pointer per 4,096 elements (one more step to an element).
//! Unlike a tenant's rules ([`crate::classify`]'s `Chunked`), which are searched, the chunks
//! are all full but the last, so an element is found by its index in O(1).

use std::ops::Index;
use std::sync::Arc;

const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;

/// (chunk, offset in it) of element `index`.
#[inline]
const fn place(index: usize) -> (usize, usize) {
    (index >> CHUNK_BITS, index & (CHUNK - 1))
}

#[derive(Debug, Clone)]
pub struct ChunkedVec<T> {
    /// Every chunk is full but the last.
    chunks: Vec<Arc<[T]>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec { chunks: Vec::new(), len: 0 }
    }
}

impl<T> ChunkedVec<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        let (chunk, offset) = place(index);
        self.chunks.get(chunk).and_then(|chunk| chunk.get(offset))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }
}

impl<T: Clone> ChunkedVec<T> {
    /// Element `index` becomes `value` (copying its chunk if another copy shares it).
    pub fn set(&mut self, index: usize, value: T) {
        assert!(index < self.len, "index {index} of {}", self.len);
        let (chunk, offset) = place(index);
        Arc::make_mut(&mut self.chunks[chunk])[offset] = value;
    }

    pub fn push(&mut self, value: T) {
        match self.chunks.last_mut().filter(|last| last.len() < CHUNK) {
            Some(last) => *last = last.iter().cloned().chain([value]).collect(),
            None => self.chunks.push(Arc::from([value])),
        }
        self.len += 1;
    }

    /// `value` goes in at `index`; later elements move up by one (their chunks are remade).
    pub fn insert(&mut self, index: usize, value: T) {
        assert!(index <= self.len, "insert at {index} of {}", self.len);
        if index == self.len {
            return self.push(value);
        }
        self.remake_from(index, |tail, at| tail.insert(at, value));
    }

    /// Removes element `index`; later elements move down by one.
    pub fn remove(&mut self, index: usize) {
        assert!(index < self.len, "remove {index} of {}", self.len);
        self.remake_from(index, |tail, at| {
            tail.remove(at);
        });
    }

    /// Remakes the chunks from the one holding `index` on, after `edit` changed their
    /// elements (given flat, with `index` at the position it is given).
    fn remake_from(&mut self, index: usize, edit: impl FnOnce(&mut Vec<T>, usize)) {
        let first = index >> CHUNK_BITS;
        let mut tail: Vec<T> = self.chunks[first..].iter().flat_map(|chunk| chunk.iter().cloned()).collect();
        edit(&mut tail, index - (first << CHUNK_BITS));
        self.chunks.truncate(first);
        self.len = (first << CHUNK_BITS) + tail.len();
        self.chunks.extend(tail.chunks(CHUNK).map(Arc::from));
    }
}

/// A [`ChunkedVec`] of chunks: copying it costs a pointer per 64 chunks, and changing an element
/// copies its chunk and its group of chunk pointers.
#[derive(Debug, Clone)]
pub struct GroupedVec<T> {
    chunks: ChunkedVec<Arc<[T]>>,
    len: usize,
}

impl<T> Default for GroupedVec<T> {
    fn default() -> Self {
        GroupedVec { chunks: ChunkedVec::default(), len: 0 }
    }
}

impl<T> GroupedVec<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        let (chunk, offset) = place(index);
        self.chunks.get(chunk).and_then(|chunk| chunk.get(offset))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }
}

impl<T: Clone> GroupedVec<T> {
    /// Element `index` becomes `value` (its chunk copied).
    pub fn set(&mut self, index: usize, value: T) {
        assert!(index < self.len, "index {index} of {}", self.len);
        let (at, offset) = place(index);
        let mut chunk = self.chunks[at].to_vec();
        chunk[offset] = value;
        self.chunks.set(at, chunk.into());
    }

    pub fn push(&mut self, value: T) {
        match self.chunks.len().checked_sub(1).filter(|_| !self.len.is_multiple_of(CHUNK)) {
            Some(last) => {
                let grown: Arc<[T]> = self.chunks[last].iter().cloned().chain([value]).collect();
                self.chunks.set(last, grown);
            }
            None => self.chunks.push(Arc::from([value])),
        }
        self.len += 1;
    }

    /// `value` goes in at `index`; later elements move up by one (their chunks are remade).
    pub fn insert(&mut self, index: usize, value: T) {
        assert!(index <= self.len, "insert at {index} of {}", self.len);
        if index == self.len {
            return self.push(value);
        }
        self.remake_from(index, |tail, at| tail.insert(at, value));
    }

    /// Removes element `index`; later elements move down by one (their chunks are remade).
    pub fn remove(&mut self, index: usize) {
        assert!(index < self.len, "remove {index} of {}", self.len);
        self.remake_from(index, |tail, at| {
            tail.remove(at);
        });
    }

    /// Remakes the chunks from the one holding `index` on, as [`ChunkedVec`] does, and their
    /// pointers from the group holding that chunk on: the chunks before are shared as they are.
    fn remake_from(&mut self, index: usize, edit: impl FnOnce(&mut Vec<T>, usize)) {
        let first = index >> CHUNK_BITS;
        let mut tail: Vec<T> = self.chunks.iter().skip(first).flat_map(|chunk| chunk.iter().cloned()).collect();
        edit(&mut tail, index - (first << CHUNK_BITS));
        self.len = (first << CHUNK_BITS) + tail.len();
        let chunks: Vec<Arc<[T]>> = tail.chunks(CHUNK).map(Arc::from).collect();
        self.chunks.remake_from(first, |pointers, at| {
            pointers.truncate(at);
            pointers.extend(chunks);
        });
    }
}

impl<T> Index<usize> for GroupedVec<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        let (chunk, offset) = place(index);
        &self.chunks[chunk][offset]
    }
}

impl<T: Clone> FromIterator<T> for GroupedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let all: Vec<T> = items.into_iter().collect();
        GroupedVec { len: all.len(), chunks: all.chunks(CHUNK).map(Arc::from).collect() }
    }
}

impl<T: Clone> From<Vec<T>> for GroupedVec<T> {
    fn from(items: Vec<T>) -> Self {
        items.into_iter().collect()
    }
}

#[cfg(test)]
impl<T> GroupedVec<T> {
    /// How many groups of chunk pointers `self` and `other` share by pointer.
    pub(crate) fn shared_groups(&self, other: &GroupedVec<T>) -> usize {
        self.chunks.shared_chunks(&other.chunks)
    }
}

#[cfg(test)]
impl<T> ChunkedVec<T> {
    /// How many chunks `self` and `other` share by pointer, position by position.
    pub(crate) fn shared_chunks(&self, other: &ChunkedVec<T>) -> usize {
        self.chunks.iter().zip(&other.chunks).filter(|(a, b)| Arc::ptr_eq(a, b)).count()
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        let (chunk, offset) = place(index);
        &self.chunks[chunk][offset]
    }
}

impl<T: Clone> FromIterator<T> for ChunkedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let all: Vec<T> = items.into_iter().collect();
        ChunkedVec { len: all.len(), chunks: all.chunks(CHUNK).map(Arc::from).collect() }
    }
}

impl<T: Clone> From<Vec<T>> for ChunkedVec<T> {
    fn from(items: Vec<T>) -> Self {
        items.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_match_a_plain_vector_and_copies_share_untouched_chunks() {
        let mut plain: Vec<u32> = (0..200).collect();
        let mut chunked: ChunkedVec<u32> = plain.iter().copied().collect();
        let before = chunked.clone();
        chunked.set(130, 7);
        plain[130] = 7;
        assert!(Arc::ptr_eq(&before.chunks[0], &chunked.chunks[0]) && !Arc::ptr_eq(&before.chunks[2], &chunked.chunks[2]));
        assert_eq!(before[130], 130);
        for (at, value) in [(0, 1000), (64, 1001), (201, 1002), (203, 1003), (150, 1004)] {
            chunked.insert(at, value);
            plain.insert(at, value);
        }
        for at in [0, 63, 64, 100, usize::MAX] {
            let at = at.min(plain.len() - 1); // MAX: the last
            chunked.remove(at);
            plain.remove(at);
        }
        for value in 0..70 {
            chunked.push(value);
            plain.push(value);
        }
        assert_eq!(chunked.len(), plain.len());
        assert_eq!(chunked.iter().copied().collect::<Vec<_>>(), plain);
        assert!((0..plain.len()).all(|i| chunked[i] == plain[i] && chunked.get(i) == Some(&plain[i])));
        assert_eq!(chunked.get(plain.len()), None);
        assert!(chunked.chunks.iter().rev().skip(1).all(|chunk| chunk.len() == CHUNK));
    }

    #[test]
    fn a_grouped_vector_edits_as_a_plain_one_and_a_copy_shares_untouched_groups() {
        let mut plain: Vec<u32> = (0..10_000).collect();
        let mut grouped: GroupedVec<u32> = plain.iter().copied().collect();
        let before = grouped.clone();
        grouped.set(9_000, 7);
        plain[9_000] = 7;
        assert_eq!((grouped.shared_groups(&before), before[9_000]), (2, 9_000)); // 0-4095 and 4096-8191 shared, 8192- copied
        for (at, value) in [(0, 1), (64, 2), (10_001, 3), (4_096, 4)] {
            grouped.insert(at, value);
            plain.insert(at, value);
        }
        for at in [0, 63, 4_095, 10_000] {
            grouped.remove(at);
            plain.remove(at);
        }
        for value in 0..130 {
            grouped.push(value);
            plain.push(value);
        }
        assert_eq!((grouped.len(), grouped.iter().copied().collect::<Vec<_>>()), (plain.len(), plain.clone()));
        assert!((0..plain.len()).all(|i| grouped[i] == plain[i] && grouped.get(i) == Some(&plain[i])));
        assert_eq!(grouped.get(plain.len()), None);
    }
}
