//! Vectors whose copies share their elements in chunks, so that an update of one tenant among
//! 100,000 copies the engine's per-tenant vectors chunk by chunk instead of element by element.
//! [`PairedVec`] (`chunked_vec/paired.rs`), for what the data path reads, finds an element in O(1).
//! [`GroupedVec`], for the vectors the data path does not read, shares chunks of up to 64 in
//! groups of up to 64: a copy costs a pointer per group, an element is found by a binary search
//! of counts, and an insert or removal anywhere copies one chunk and one group.

use std::ops::Index;
use std::sync::Arc;

mod paired;
pub use paired::PairedVec;

const CHUNK: usize = 64;
/// Chunks in a group of a [`GroupedVec`], at most.
const GROUP: usize = 64;

/// The elements of a [`GroupedVec`] in pieces (chunks of elements, or groups of chunks), each
/// of at most its capacity of parts and none empty; `ends[p]` counts the elements of pieces 0..=p,
/// so an element's piece is found by a binary search and an edit moves only pointers and counts.
#[derive(Debug, Clone)]
struct Pieces<P> {
    pieces: Vec<P>,
    ends: Vec<usize>,
}

/// A piece of [`Pieces`]: a chunk of elements, or a shared group of chunks.
trait Piece: Clone {
    type Item;
    /// How many parts (elements of a chunk, chunks of a group) a piece holds at most.
    const CAPACITY: usize;
    /// How many elements a full piece holds.
    const FULL_COUNT: usize;
    fn single(value: Self::Item) -> Self;
    fn count(&self) -> usize;
    fn parts(&self) -> usize;
    fn item(&self, at: usize) -> Option<&Self::Item>;
    fn put(&mut self, at: usize, value: Self::Item);
    fn insert_item(&mut self, at: usize, value: Self::Item);
    fn remove_item(&mut self, at: usize);
    /// Keeps the parts before `part` and returns the others.
    fn split_at_part(&mut self, part: usize) -> Self;
    fn join(&mut self, other: Self);
    fn items(&self) -> impl DoubleEndedIterator<Item = &Self::Item> + '_;
}

impl<T: Clone> Piece for Arc<[T]> {
    type Item = T;
    const CAPACITY: usize = CHUNK;
    const FULL_COUNT: usize = CHUNK;

    fn single(value: T) -> Self {
        Arc::from([value])
    }

    fn count(&self) -> usize {
        <[T]>::len(self)
    }

    fn parts(&self) -> usize {
        <[T]>::len(self)
    }

    fn item(&self, at: usize) -> Option<&T> {
        <[T]>::get(self, at)
    }

    fn put(&mut self, at: usize, value: T) {
        Arc::make_mut(self)[at] = value;
    }

    fn insert_item(&mut self, at: usize, value: T) {
        let mut items = self.to_vec();
        items.insert(at, value);
        *self = items.into();
    }

    fn remove_item(&mut self, at: usize) {
        let mut items = self.to_vec();
        items.remove(at);
        *self = items.into();
    }

    fn split_at_part(&mut self, part: usize) -> Self {
        let tail = Arc::from(&self[part..]);
        *self = Arc::from(&self[..part]);
        tail
    }

    fn join(&mut self, other: Self) {
        *self = self.iter().chain(other.iter()).cloned().collect();
    }

    fn items(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.iter()
    }
}

impl<P: Piece> Piece for Arc<Pieces<P>> {
    type Item = P::Item;
    const CAPACITY: usize = GROUP;
    const FULL_COUNT: usize = GROUP * P::FULL_COUNT;

    fn single(value: P::Item) -> Self {
        Arc::new(Pieces { pieces: vec![P::single(value)], ends: vec![1] })
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn parts(&self) -> usize {
        self.pieces.len()
    }

    fn item(&self, at: usize) -> Option<&P::Item> {
        self.get(at)
    }

    fn put(&mut self, at: usize, value: P::Item) {
        Arc::make_mut(self).set(at, value);
    }

    fn insert_item(&mut self, at: usize, value: P::Item) {
        Arc::make_mut(self).insert(at, value);
    }

    fn remove_item(&mut self, at: usize) {
        Arc::make_mut(self).remove(at);
    }

    fn split_at_part(&mut self, part: usize) -> Self {
        let group = Arc::make_mut(self);
        let base = group.start(part);
        let ends = group.ends.split_off(part).into_iter().map(|end| end - base).collect();
        Arc::new(Pieces { pieces: group.pieces.split_off(part), ends })
    }

    fn join(&mut self, other: Self) {
        let group = Arc::make_mut(self);
        let base = group.len();
        group.pieces.extend(other.pieces.iter().cloned());
        group.ends.extend(other.ends.iter().map(|end| end + base));
    }

    fn items(&self) -> impl DoubleEndedIterator<Item = &P::Item> + '_ {
        self.pieces.iter().flat_map(|piece| piece.items())
    }
}

impl<P: Piece> Pieces<P> {
    fn of(pieces: Vec<P>) -> Self {
        let ends = pieces.iter().scan(0, |end, piece| Some(*end + piece.count()).inspect(|&next| *end = next)).collect();
        Pieces { pieces, ends }
    }

    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// How many elements the pieces before `piece` hold.
    fn start(&self, piece: usize) -> usize {
        piece.checked_sub(1).map_or(0, |before| self.ends[before])
    }

    /// The piece holding element `index`, and the element's place in it.
    /// Full pieces before it (as a vector made at once has) find it in O(1).
    #[inline]
    fn find(&self, index: usize) -> Option<(usize, usize)> {
        let guess = index / P::FULL_COUNT;
        let piece = match self.ends.get(guess) {
            Some(&end) if index < end && self.start(guess) <= index => guess,
            _ => self.ends.partition_point(|&end| end <= index),
        };
        (piece < self.pieces.len()).then(|| (piece, index - self.start(piece)))
    }

    fn get(&self, index: usize) -> Option<&P::Item> {
        let (piece, at) = self.find(index)?;
        self.pieces[piece].item(at)
    }

    fn set(&mut self, index: usize, value: P::Item) {
        let (piece, at) = self.find(index).unwrap_or_else(|| panic!("index {index} of {}", self.len()));
        self.pieces[piece].put(at, value);
    }

    /// `value` goes in at `index`, in the piece before it when `index` ends one. A piece that
    /// overflows is split in halves, or, when it grew at its end, its last part starts a new
    /// piece (a vector filled by pushes keeps full pieces).
    fn insert(&mut self, index: usize, value: P::Item) {
        if self.pieces.is_empty() {
            self.pieces.push(P::single(value));
            self.ends.push(1);
            return;
        }
        let piece = self.ends.partition_point(|&end| end < index).min(self.pieces.len() - 1);
        let at = index - self.start(piece);
        let at_end = at == self.pieces[piece].count();
        self.pieces[piece].insert_item(at, value);
        self.ends[piece..].iter_mut().for_each(|end| *end += 1);
        let parts = self.pieces[piece].parts();
        if parts > P::CAPACITY {
            let tail = self.pieces[piece].split_at_part(if at_end { parts - 1 } else { parts / 2 });
            self.ends.insert(piece, self.ends[piece] - tail.count());
            self.pieces.insert(piece + 1, tail);
        }
    }

    /// Removes element `index`; a piece left empty goes, and one left under a quarter full
    /// joins a neighbour that has room.
    fn remove(&mut self, index: usize) {
        let (piece, at) = self.find(index).unwrap_or_else(|| panic!("remove {index} of {}", self.len()));
        self.pieces[piece].remove_item(at);
        self.ends[piece..].iter_mut().for_each(|end| *end -= 1);
        if self.pieces[piece].count() == 0 {
            self.pieces.remove(piece);
            self.ends.remove(piece);
        } else if self.pieces[piece].parts() < P::CAPACITY / 4 {
            self.join_neighbour(piece);
        }
    }

    fn join_neighbour(&mut self, piece: usize) {
        let first = if piece + 1 < self.pieces.len() { piece } else { piece.saturating_sub(1) };
        if first + 1 >= self.pieces.len() || self.pieces[first].parts() + self.pieces[first + 1].parts() > P::CAPACITY {
            return;
        }
        let second = self.pieces.remove(first + 1);
        self.ends.remove(first);
        self.pieces[first].join(second);
    }
}

/// Chunks of up to 64 elements in shared groups of up to 64 chunks, for the vectors the data path
/// does not read: a copy costs a pointer per group (about 4,096 elements); changing, inserting
/// or removing an element copies its chunk and its group's chunk pointers, whatever its place
/// (later groups are shared untouched), and one more step finds an element (a binary search of
/// the groups' and the chunks' counts).
#[derive(Debug, Clone)]
pub struct GroupedVec<T> {
    groups: Pieces<Arc<Pieces<Arc<[T]>>>>,
}

impl<T> Default for GroupedVec<T> {
    fn default() -> Self {
        GroupedVec { groups: Pieces { pieces: Vec::new(), ends: Vec::new() } }
    }
}

impl<T: Clone> GroupedVec<T> {
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        self.groups.get(index)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.groups.pieces.iter().flat_map(|group| group.items())
    }

    /// Element `index` becomes `value` (its chunk copied).
    pub fn set(&mut self, index: usize, value: T) {
        self.groups.set(index, value);
    }

    pub fn push(&mut self, value: T) {
        self.groups.insert(self.len(), value);
    }

    /// `value` goes in at `index`; later elements move up by one.
    pub fn insert(&mut self, index: usize, value: T) {
        assert!(index <= self.len(), "insert at {index} of {}", self.len());
        self.groups.insert(index, value);
    }

    /// Removes element `index`; later elements move down by one.
    pub fn remove(&mut self, index: usize) {
        self.groups.remove(index);
    }
}

impl<T: Clone> Index<usize> for GroupedVec<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        self.get(index).unwrap_or_else(|| panic!("index {index} of {}", self.len()))
    }
}

impl<T: Clone> FromIterator<T> for GroupedVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let all: Vec<T> = items.into_iter().collect();
        let chunks: Vec<Arc<[T]>> = all.chunks(CHUNK).map(Arc::from).collect();
        GroupedVec { groups: Pieces::of(chunks.chunks(GROUP).map(|group| Arc::new(Pieces::of(group.to_vec()))).collect()) }
    }
}

impl<T: Clone> From<Vec<T>> for GroupedVec<T> {
    fn from(items: Vec<T>) -> Self {
        items.into_iter().collect()
    }
}

#[cfg(test)]
impl<T> GroupedVec<T> {
    /// How many of `self`'s groups of chunk pointers `other` holds too (by pointer).
    pub(crate) fn shared_groups(&self, other: &GroupedVec<T>) -> usize {
        self.groups.pieces.iter().filter(|group| other.groups.pieces.iter().any(|theirs| Arc::ptr_eq(group, theirs))).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Checks that no piece is empty or over its capacity and that the counts add up.
    fn check_pieces<P: Piece>(pieces: &Pieces<P>) {
        assert_eq!(pieces.pieces.len(), pieces.ends.len());
        for piece in &pieces.pieces {
            assert!(piece.count() > 0 && piece.parts() <= P::CAPACITY, "{} elements in {} parts", piece.count(), piece.parts());
            assert_eq!(piece.items().count(), piece.count());
        }
        assert!(pieces.ends.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(Pieces::of(pieces.pieces.clone()).ends, pieces.ends);
    }

    fn check(grouped: &GroupedVec<u64>, plain: &[u64]) {
        check_pieces(&grouped.groups);
        grouped.groups.pieces.iter().for_each(|group| check_pieces(group));
        assert_eq!(grouped.len(), plain.len());
        assert!(grouped.iter().eq(plain.iter()));
        assert!((0..plain.len()).all(|i| grouped[i] == plain[i]));
        assert_eq!(grouped.get(plain.len()), None);
    }

    #[test]
    fn a_grouped_vector_under_random_edits_stays_a_plain_one_and_its_copies_keep_their_elements() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        for start in [0, 1, 63, 64, 4_095, 4_096, 20_000] {
            let mut plain: Vec<u64> = (0..start as u64).collect();
            let mut grouped: GroupedVec<u64> = plain.clone().into();
            let mut copies = Vec::new();
            for step in 0..3_000u64 {
                let value = 1_000_000 + step;
                // Runs of edits in one place, to fill and drain chunks and groups there.
                let at = if step % 500 < 250 { plain.len() / 2 } else { random(plain.len() + 1) };
                match random(8) {
                    0..=2 => {
                        grouped.insert(at, value);
                        plain.insert(at, value);
                    }
                    3..=5 if !plain.is_empty() => {
                        let at = at.min(plain.len() - 1);
                        grouped.remove(at);
                        plain.remove(at);
                    }
                    6 if !plain.is_empty() => {
                        let at = at.min(plain.len() - 1);
                        grouped.set(at, value);
                        plain[at] = value;
                    }
                    _ => grouped.push(value),
                }
                if plain.len() < grouped.len() {
                    plain.push(value);
                }
                if step % 300 == 0 {
                    copies.push((grouped.clone(), plain.clone()));
                }
            }
            check(&grouped, &plain);
            copies.iter().for_each(|(copy, then)| check(copy, then));
        }
    }

    #[test]
    fn an_insert_or_removal_in_the_middle_copies_only_the_group_that_holds_it() {
        let mut grouped: GroupedVec<u64> = (0..100_000).collect();
        let before = grouped.clone();
        grouped.insert(50_000, 7);
        // Its full chunk split, and so its full group: 25 groups of 4,096 became 26.
        assert_eq!((before.groups.pieces.len(), grouped.groups.pieces.len(), grouped.shared_groups(&before)), (25, 26, 24));
        let before = grouped.clone();
        grouped.remove(50_001);
        grouped.remove(10);
        assert_eq!((grouped.shared_groups(&before), grouped[49_998], grouped[49_999]), (24, 49_999, 7));
        // 10 removed: 49,999 and 7 moved down
    }
}
