//! A vector whose copies share its elements in chunks of 64: copying it costs a pointer per
//! chunk, and changing one element copies only that element's chunk. An update of one tenant
//! among 10,000 copies the engine's per-tenant vectors this way instead of element by element.
//! Unlike a tenant's rules ([`crate::classify`]'s `Chunked`), which are searched, the chunks
//! are all full but the last, so an element is found by its index in O(1).

use std::ops::Index;
use std::sync::Arc;

const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;

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
        self.chunks.get(index >> CHUNK_BITS).and_then(|chunk| chunk.get(index & (CHUNK - 1)))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }
}

impl<T: Clone> ChunkedVec<T> {
    /// Element `index` becomes `value` (copying its chunk if another copy shares it).
    pub fn set(&mut self, index: usize, value: T) {
        assert!(index < self.len, "index {index} of {}", self.len);
        Arc::make_mut(&mut self.chunks[index >> CHUNK_BITS])[index & (CHUNK - 1)] = value;
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

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        &self.chunks[index >> CHUNK_BITS][index & (CHUNK - 1)]
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
}
