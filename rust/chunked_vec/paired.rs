//! [`PairedVec`]: two vectors of one length (the engine's tenant heads and hot state) in shared
//! chunks of up to 128 pairs, themselves in shared groups of 32 chunks, so that copying them
//! costs a pointer per group (4,096 pairs) and changing, inserting or removing a pair copies one
//! chunk, one group's pointers and 12 bytes of index per 64 pairs, whatever the length (a chunk
//! that splits or empties regroups the chunks after it: a pointer each). Chunks need not be full,
//! yet element `i` is found in O(1): every chunk but the last holds at least a page of 64, so a
//! page of indices spans at most two chunks, and a table by page names them.
//! (Measured with `cargo run --release --example apply_cost 10000 100000`: chunks of 256 made a
//! copy cost more at 10,000 tenants, and no groups, a pointer per chunk, cost more at 100,000.)

use std::sync::Arc;

/// Pairs a chunk holds at most.
const CAPACITY: usize = 128;
const PAGE_BITS: u32 = 6;
/// Pairs every chunk but the last holds at least, and indices a page spans.
const PAGE: usize = 1 << PAGE_BITS;
const GROUP_BITS: u32 = 5;
/// Chunks in a group, which copies share (every group is full but the last).
const GROUP: usize = 1 << GROUP_BITS;

type Group<A, B> = Arc<[Arc<Chunk<A, B>>]>;

/// A chunk's pairs in two columns (the first one compact, for the data path's cache), filled
/// from the start; the slots past `len` hold defaults.
#[derive(Debug, Clone)]
struct Chunk<A, B> {
    len: usize,
    firsts: [A; CAPACITY],
    seconds: [B; CAPACITY],
}

impl<A: Default, B: Default> Chunk<A, B> {
    fn empty() -> Self {
        Chunk { len: 0, firsts: std::array::from_fn(|_| A::default()), seconds: std::array::from_fn(|_| B::default()) }
    }

    fn of(pairs: impl IntoIterator<Item = (A, B)>) -> Self {
        let mut chunk = Chunk::empty();
        pairs.into_iter().for_each(|(a, b)| chunk.insert(chunk.len, a, b));
        chunk
    }

    fn insert(&mut self, at: usize, a: A, b: B) {
        let end = self.len;
        (self.firsts[end], self.seconds[end]) = (a, b);
        self.firsts[at..=end].rotate_right(1);
        self.seconds[at..=end].rotate_right(1);
        self.len += 1;
    }

    fn remove(&mut self, at: usize) -> (A, B) {
        self.firsts[at..self.len].rotate_left(1);
        self.seconds[at..self.len].rotate_left(1);
        self.len -= 1;
        (std::mem::take(&mut self.firsts[self.len]), std::mem::take(&mut self.seconds[self.len]))
    }

    /// Takes the first `count` pairs out of the chunk.
    fn take_front(&mut self, count: usize) -> Vec<(A, B)> {
        self.firsts[..self.len].rotate_left(count);
        self.seconds[..self.len].rotate_left(count);
        self.drain_from(self.len - count).collect()
    }

    /// Takes the pairs from `at` on out of the chunk.
    fn drain_from(&mut self, at: usize) -> impl Iterator<Item = (A, B)> + '_ {
        let end = std::mem::replace(&mut self.len, at);
        (at..end).map(|i| (std::mem::take(&mut self.firsts[i]), std::mem::take(&mut self.seconds[i])))
    }
}

/// Page `p`'s indices lie in `chunk` up to `split` (`chunk`'s end) and in the next chunk from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Page {
    chunk: u32,
    start: u32,
    split: u32,
}

/// Two vectors of one length in shared chunks: see the module's documentation.
#[derive(Debug, Clone)]
pub struct PairedVec<A, B> {
    /// Chunk `c` is `groups[c / GROUP][c % GROUP]`.
    groups: Vec<Group<A, B>>,
    /// Where each chunk starts.
    starts: Vec<u32>,
    pages: Vec<Page>,
    len: usize,
}

impl<A, B> Default for PairedVec<A, B> {
    fn default() -> Self {
        PairedVec { groups: Vec::new(), starts: Vec::new(), pages: Vec::new(), len: 0 }
    }
}

impl<A, B> PairedVec<A, B> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk holding element `index` and its place there: a look at its page.
    #[inline]
    fn find(&self, index: usize) -> Option<(usize, usize)> {
        if index >= self.len {
            return None;
        }
        let page = self.pages[index >> PAGE_BITS];
        let index = index as u32;
        Some(if index < page.split { (page.chunk as usize, (index - page.start) as usize) } else { (page.chunk as usize + 1, (index - page.split) as usize) })
    }

    #[inline]
    pub fn get(&self, index: usize) -> Option<(&A, &B)> {
        let (chunk, at) = self.find(index)?;
        let chunk = self.chunk(chunk);
        Some((&chunk.firsts[at], &chunk.seconds[at]))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&A, &B)> + '_ {
        self.chunks().flat_map(|chunk| chunk.firsts[..chunk.len].iter().zip(&chunk.seconds[..chunk.len]))
    }

    #[inline]
    fn chunk(&self, chunk: usize) -> &Chunk<A, B> {
        &self.groups[chunk >> GROUP_BITS][chunk & (GROUP - 1)]
    }

    fn chunks(&self) -> impl DoubleEndedIterator<Item = &Arc<Chunk<A, B>>> + '_ {
        self.groups.iter().flat_map(|group| group.iter())
    }

    fn chunk_count(&self) -> usize {
        self.groups.last().map_or(0, |last| (self.groups.len() - 1) * GROUP + last.len())
    }

    /// Replaces `removed` chunks from chunk `at` on with `added`, regrouping the chunks after.
    fn splice_chunks(&mut self, at: usize, removed: usize, added: impl IntoIterator<Item = Arc<Chunk<A, B>>>) {
        let first_group = at >> GROUP_BITS;
        let mut chunks = Vec::new();
        for group in self.groups.drain(first_group..) {
            chunks.extend(group.iter().cloned());
        }
        let offset = at - (first_group << GROUP_BITS);
        chunks.splice(offset..offset + removed, added);
        let mut chunks = chunks.into_iter().peekable();
        while chunks.peek().is_some() {
            self.groups.push(chunks.by_ref().take(GROUP).collect());
        }
    }

    /// Recounts the chunks' starts from chunk `from` on, and the pages those cover.
    fn restart_from(&mut self, from: usize) {
        self.starts.truncate(from);
        let first = if from == 0 { 0 } else { self.end_of(from - 1) };
        let mut start = first;
        for chunk in from..self.chunk_count() {
            self.starts.push(start as u32);
            start += self.chunk(chunk).len;
        }
        self.len = start;
        let first_page = first >> PAGE_BITS;
        self.pages.truncate(first_page);
        // The first page to redo may begin in the chunk before.
        let mut chunk = from.saturating_sub(1);
        for page in first_page..self.len.div_ceil(PAGE) {
            let first = page << PAGE_BITS;
            while self.end_of(chunk) <= first {
                chunk += 1;
            }
            self.pages.push(Page { chunk: chunk as u32, start: self.starts[chunk], split: self.end_of(chunk) as u32 });
        }
    }

    fn end_of(&self, chunk: usize) -> usize {
        self.starts[chunk] as usize + self.chunk(chunk).len
    }
}

impl<A: Clone + Default, B: Clone + Default> PairedVec<A, B> {
    /// Chunk `chunk`, copied (with its group's pointers) if another copy shares it.
    fn chunk_mut(&mut self, chunk: usize) -> &mut Chunk<A, B> {
        let group = Arc::make_mut(&mut self.groups[chunk >> GROUP_BITS]);
        Arc::make_mut(&mut group[chunk & (GROUP - 1)])
    }

    /// Pair `index` becomes `(a, b)` (its chunk copied if another copy shares it).
    pub fn set(&mut self, index: usize, a: A, b: B) {
        let (chunk, at) = self.find(index).unwrap_or_else(|| panic!("index {index} of {}", self.len));
        let chunk = self.chunk_mut(chunk);
        (chunk.firsts[at], chunk.seconds[at]) = (a, b);
    }

    pub fn push(&mut self, a: A, b: B) {
        self.insert(self.len, a, b);
    }

    /// `(a, b)` goes in at `index`; later pairs move up by one. A full chunk splits in halves
    /// (at the end, a new chunk starts instead, so that a vector filled by pushes keeps full chunks).
    pub fn insert(&mut self, index: usize, a: A, b: B) {
        assert!(index <= self.len, "insert at {index} of {}", self.len);
        assert!(self.len < u32::MAX as usize, "{} pairs", self.len);
        let count = self.chunk_count();
        let (mut chunk, mut at) = match self.find(index) {
            Some(place) => place,
            None if count > 0 && self.chunk(count - 1).len < CAPACITY => (count - 1, self.chunk(count - 1).len),
            None => {
                self.splice_chunks(count, 0, [Arc::new(Chunk::empty())]);
                (count, 0)
            }
        };
        let first_changed = chunk;
        if self.chunk(chunk).len == CAPACITY {
            let tail = Chunk::of(self.chunk_mut(chunk).drain_from(CAPACITY / 2));
            self.splice_chunks(chunk + 1, 0, [Arc::new(tail)]);
            if at > CAPACITY / 2 {
                (chunk, at) = (chunk + 1, at - CAPACITY / 2);
            }
        }
        self.chunk_mut(chunk).insert(at, a, b);
        self.restart_from(first_changed);
    }

    /// Removes pair `index`; later pairs move down by one. A chunk left under a page (but the last)
    /// takes the next one's pairs, or, if both do not fit in one, half of them.
    pub fn remove(&mut self, index: usize) {
        let (chunk, at) = self.find(index).unwrap_or_else(|| panic!("remove {index} of {}", self.len));
        self.chunk_mut(chunk).remove(at);
        let left = self.chunk(chunk).len;
        if left == 0 {
            self.splice_chunks(chunk, 1, []);
        } else if left < PAGE && chunk + 1 < self.chunk_count() {
            let next_len = self.chunk(chunk + 1).len;
            let moved = if left + next_len <= CAPACITY { next_len } else { (left + next_len) / 2 - left };
            let taken = self.chunk_mut(chunk + 1).take_front(moved);
            let this = self.chunk_mut(chunk);
            taken.into_iter().for_each(|(a, b)| this.insert(this.len, a, b));
            if self.chunk(chunk + 1).len == 0 {
                self.splice_chunks(chunk + 1, 1, []);
            }
        }
        self.restart_from(chunk.min(self.chunk_count()));
    }
}

impl<A: Clone + Default, B: Clone + Default> FromIterator<(A, B)> for PairedVec<A, B> {
    fn from_iter<I: IntoIterator<Item = (A, B)>>(pairs: I) -> Self {
        let mut paired = PairedVec::default();
        let mut pairs = pairs.into_iter().peekable();
        let mut chunks = Vec::new();
        while pairs.peek().is_some() {
            chunks.push(Arc::new(Chunk::of(pairs.by_ref().take(CAPACITY))));
        }
        paired.splice_chunks(0, 0, chunks);
        paired.restart_from(0);
        paired
    }
}

#[cfg(test)]
impl<A, B> PairedVec<A, B> {
    /// How many chunks `self` and `other` share by pointer.
    pub(crate) fn shared_chunks(&self, other: &PairedVec<A, B>) -> usize {
        self.chunks().filter(|chunk| other.chunks().any(|theirs| Arc::ptr_eq(chunk, theirs))).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the chunks' fill, starts and pages, and every pair against `plain`.
    fn check(paired: &PairedVec<u32, String>, plain: &[(u32, String)]) {
        let last = paired.chunk_count().saturating_sub(1);
        assert!(paired.groups.iter().rev().skip(1).all(|group| group.len() == GROUP) && paired.groups.iter().all(|group| !group.is_empty()));
        for (i, chunk) in paired.chunks().enumerate() {
            assert!(chunk.len > 0 && chunk.len <= CAPACITY && (i == last || chunk.len >= PAGE), "chunk {i} of {} holds {}", last + 1, chunk.len);
            assert!(chunk.firsts[chunk.len..].iter().all(|&a| a == 0) && chunk.seconds[chunk.len..].iter().all(String::is_empty));
        }
        let mut rebuilt = PairedVec { groups: paired.groups.clone(), ..PairedVec::default() };
        rebuilt.restart_from(0);
        assert_eq!((&rebuilt.starts, &rebuilt.pages, rebuilt.len), (&paired.starts, &paired.pages, paired.len));
        assert_eq!(paired.pages.len(), paired.len.div_ceil(PAGE));
        assert_eq!(paired.len(), plain.len());
        assert!(paired.iter().eq(plain.iter().map(|(a, b)| (a, b))));
        assert!((0..plain.len()).all(|i| paired.get(i) == Some((&plain[i].0, &plain[i].1))));
        assert_eq!(paired.get(plain.len()), None);
    }

    #[test]
    fn a_paired_vector_under_random_edits_stays_a_plain_one_and_its_copies_keep_their_pairs() {
        let mut rng = crate::test_rng::Rng(0x2545_f491_4f6c_dd1d);
        let mut random = move |below: usize| rng.below(below as u64) as usize;
        for start in [0, 1, 127, 128, 255, 256, 257, 5_000] {
            let pair = |value: usize| (value as u32 + 1, format!("v{value}"));
            let mut plain: Vec<(u32, String)> = (0..start).map(pair).collect();
            let mut paired: PairedVec<u32, String> = plain.iter().cloned().collect();
            let mut copies = Vec::new();
            for step in 0..4_000 {
                let value = 1_000_000 + step;
                // Runs of edits in one place, to fill, split and drain chunks there.
                let at = if step % 1_000 < 500 { plain.len() / 3 } else { random(plain.len() + 1) };
                match random(8) {
                    0..=2 => {
                        let (a, b) = pair(value);
                        paired.insert(at, a, b.clone());
                        plain.insert(at, (a, b));
                    }
                    3..=5 if !plain.is_empty() => {
                        let at = at.min(plain.len() - 1);
                        paired.remove(at);
                        plain.remove(at);
                    }
                    6 if !plain.is_empty() => {
                        let (at, (a, b)) = (at.min(plain.len() - 1), pair(value));
                        paired.set(at, a, b.clone());
                        plain[at] = (a, b);
                    }
                    _ => {
                        let (a, b) = pair(value);
                        paired.push(a, b.clone());
                        plain.push((a, b));
                    }
                }
                if step % 400 == 0 {
                    copies.push((paired.clone(), plain.clone()));
                }
            }
            check(&paired, &plain);
            copies.iter().for_each(|(copy, then)| check(copy, then));
        }
    }

    #[test]
    fn an_edit_anywhere_copies_one_or_two_chunks_and_pushes_keep_chunks_full() {
        let mut paired: PairedVec<u32, u64> = (0..100_000).map(|i| (i, u64::from(i))).collect();
        assert_eq!((paired.chunk_count(), paired.groups.len()), (782, 25));
        let before = paired.clone();
        paired.set(70_000, 7, 7);
        let shared_groups =
            |paired: &PairedVec<u32, u64>, before: &PairedVec<u32, u64>| paired.groups.iter().zip(&before.groups).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        assert_eq!((paired.shared_chunks(&before), shared_groups(&paired, &before)), (781, 24));
        let before = paired.clone();
        paired.insert(50_000, 8, 8); // its full chunk splits in two: the groups after it are remade
        assert_eq!((paired.chunk_count(), paired.shared_chunks(&before), shared_groups(&paired, &before)), (783, 781, 12));
        let before = paired.clone();
        paired.remove(10);
        paired.remove(50_000);
        assert_eq!((paired.shared_chunks(&before), paired.get(49_999), paired.get(69_999)), (781, Some((&8, &8)), Some((&7, &7))));
        let mut pushed = PairedVec::default();
        (0..1_000u32).for_each(|i| pushed.push(i, i));
        assert!(pushed.chunks().rev().skip(1).all(|chunk| chunk.len == CAPACITY));
    }
}
