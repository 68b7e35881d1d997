//! A vector whose copies share its elements in chunks of 64, and the chunks in groups of 64:
//! copying it costs a pointer per 4,096 elements, and changing one element copies only its
//! chunk and its group's list of chunks. An update of one tenant among 100,000 copies the
//! engine's per-tenant vectors this way (25 pointers, then 64 and 64) instead of element by
//! element. Unlike a tenant's rules ([`crate::classify`]'s `Chunked`), which are searched, the
//! chunks are all full but the last, so an element is found by its index in O(1).

use std::ops::Index;
use std::sync::Arc;

const CHUNK_BITS: u32 = 6;
const CHUNK: usize = 1 << CHUNK_BITS;
const GROUP_BITS: u32 = 6;
/// Elements in a full group.
const GROUP_SPAN: usize = CHUNK << GROUP_BITS;

type Group<T> = Arc<[Arc<[T]>]>;

#[derive(Debug, Clone)]
pub struct ChunkedVec<T> {
    /// Every chunk is full but the last, every group but the last holds `1 << GROUP_BITS`.
    groups: Vec<Group<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec { groups: Vec::new(), len: 0 }
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
        let group = self.groups.get(index >> (CHUNK_BITS + GROUP_BITS))?;
        group.get((index >> CHUNK_BITS) & ((1 << GROUP_BITS) - 1)).and_then(|chunk| chunk.get(index & (CHUNK - 1)))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.groups.iter().flat_map(|group| group.iter()).flat_map(|chunk| chunk.iter())
    }
}

impl<T: Clone> ChunkedVec<T> {
    /// Element `index` becomes `value` (copying its chunk and group if another copy shares them).
    pub fn set(&mut self, index: usize, value: T) {
        assert!(index < self.len, "index {index} of {}", self.len);
        let group = Arc::make_mut(&mut self.groups[index >> (CHUNK_BITS + GROUP_BITS)]);
        Arc::make_mut(&mut group[(index >> CHUNK_BITS) & ((1 << GROUP_BITS) - 1)])[index & (CHUNK - 1)] = value;
    }

    pub fn push(&mut self, value: T) {
        if self.len.is_multiple_of(GROUP_SPAN) {
            self.groups.push(Arc::from([Arc::from([value])]));
        } else {
            let group = self.groups.last_mut().expect("a group that is not full");
            let mut chunks = group.to_vec();
            match chunks.last_mut().filter(|last| last.len() < CHUNK) {
                Some(last) => *last = last.iter().cloned().chain([value]).collect(),
                None => chunks.push(Arc::from([value])),
            }
            *group = chunks.into();
        }
        self.len += 1;
    }

    /// `value` goes in at `index`; later elements move up by one (their groups are remade).
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

    /// Remakes the groups from the one holding `index` on, after `edit` changed their
    /// elements (given flat, with `index` at the position it is given).
    fn remake_from(&mut self, index: usize, edit: impl FnOnce(&mut Vec<T>, usize)) {
        let first = index / GROUP_SPAN;
        let mut tail: Vec<T> = self.groups[first..].iter().flat_map(|group| group.iter()).flat_map(|chunk| chunk.iter().cloned()).collect();
        edit(&mut tail, index - first * GROUP_SPAN);
        self.groups.truncate(first);
        self.len = first * GROUP_SPAN + tail.len();
        self.groups.extend(groups(&tail));
    }
}

#[cfg(test)]
impl<T> ChunkedVec<T> {
    /// How many of its groups `other` shares with it (by pointer, at the same place).
    pub(crate) fn shared_groups(&self, other: &ChunkedVec<T>) -> usize {
        self.groups.iter().zip(&other.groups).filter(|(a, b)| Arc::ptr_eq(a, b)).count()
    }
}

/// `items` in full chunks and groups (but the last of each).
fn groups<T: Clone>(items: &[T]) -> impl Iterator<Item = Group<T>> + '_ {
    items.chunks(GROUP_SPAN).map(|span| span.chunks(CHUNK).map(Arc::from).collect())
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        &self.groups[index >> (CHUNK_BITS + GROUP_BITS)][(index >> CHUNK_BITS) & ((1 << GROUP_BITS) - 1)][index & (CHUNK - 1)]
    }
}

impl<T: Clone> FromIterator<T> for ChunkedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let all: Vec<T> = items.into_iter().collect();
        ChunkedVec { len: all.len(), groups: groups(&all).collect() }
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
        let mut plain: Vec<u32> = (0..9000).collect();
        let mut chunked: ChunkedVec<u32> = plain.iter().copied().collect();
        let before = chunked.clone();
        chunked.set(4096 + 130, 7);
        plain[4096 + 130] = 7;
        // Only the element's chunk and its group's list of chunks are copied.
        assert!(Arc::ptr_eq(&before.groups[0], &chunked.groups[0]) && Arc::ptr_eq(&before.groups[2], &chunked.groups[2]));
        assert!(!Arc::ptr_eq(&before.groups[1], &chunked.groups[1]));
        let shared = |c: usize| Arc::ptr_eq(&before.groups[1][c], &chunked.groups[1][c]);
        assert!(shared(0) && !shared(2) && (3..64).all(shared));
        assert_eq!(before[4096 + 130], 4096 + 130);
        for (at, value) in [(0, 1000), (64, 1001), (4096, 1005), (8201, 1002), (8203, 1003), (150, 1004)] {
            chunked.insert(at, value);
            plain.insert(at, value);
        }
        for at in [0, 63, 64, 100, 4095, 4100, usize::MAX] {
            let at = at.min(plain.len() - 1); // MAX: the last
            chunked.remove(at);
            plain.remove(at);
        }
        for value in 0..4200 {
            chunked.push(value);
            plain.push(value);
        }
        assert_eq!(chunked.len(), plain.len());
        assert_eq!(chunked.iter().copied().collect::<Vec<_>>(), plain);
        assert!((0..plain.len()).all(|i| chunked[i] == plain[i] && chunked.get(i) == Some(&plain[i])));
        assert_eq!(chunked.get(plain.len()), None);
        let chunks: Vec<&Arc<[u32]>> = chunked.groups.iter().flat_map(|group| group.iter()).collect();
        assert!(chunks.iter().rev().skip(1).all(|chunk| chunk.len() == CHUNK));
        assert!(chunked.groups.iter().rev().skip(1).all(|group| group.len() == 1 << GROUP_BITS));
    }
}
