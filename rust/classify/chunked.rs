//! A sequence kept in chunks that clones share: an edit of a clone copies the chunk it changes
//! and the list of chunks (one entry per [`CHUNK`] items), not the sequence. A tenant's rules
//! and what each does live in these, so that a live edit of a large tenant copies kilobytes.

use std::sync::Arc;

/// Items a chunk is cut to. An edited chunk is split past twice this and merged with a
/// neighbour below a quarter, so an edit copies at most a few kilobytes and a lookup searches
/// at most `len / (CHUNK / 4)` chunks.
const CHUNK: usize = 128;

/// An item of a [`Chunked`] sequence, which counts the items that open a group: groups are
/// numbered by that count, so inserting or removing one renumbers no other item.
pub trait Item: Clone {
    fn opens_group(&self) -> bool {
        true
    }
}

#[derive(Debug, Clone)]
struct Chunk<T> {
    items: Arc<[T]>,
    /// Items, and groups opened, in this chunk and those before it (a chunk's own groups are
    /// the difference from the chunk before: kept once, and in 32 bits, a one-chunk tenant's
    /// list is 24 B).
    end: u32,
    groups_end: u32,
}

impl<T> Chunk<T> {
    fn end(&self) -> usize {
        self.end as usize
    }

    fn groups_end(&self) -> usize {
        self.groups_end as usize
    }
}

#[derive(Debug, Clone)]
pub struct Chunked<T> {
    /// None is empty.
    chunks: ChunkList<T>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: ChunkList::Many(Box::default()) }
    }
}

/// The chunks: a lone one (a tenant's few rules, the common case) inline (24 B, as the list is:
/// boxed, without a capacity, it fits beside the lone chunk's pointer); more than one in a list.
#[derive(Debug, Clone)]
enum ChunkList<T> {
    One(Chunk<T>),
    Many(Box<[Chunk<T>]>),
}

impl<T> std::ops::Deref for ChunkList<T> {
    type Target = [Chunk<T>];

    fn deref(&self) -> &[Chunk<T>] {
        match self {
            ChunkList::One(chunk) => std::slice::from_ref(chunk),
            ChunkList::Many(chunks) => chunks,
        }
    }
}

impl<T> std::ops::DerefMut for ChunkList<T> {
    fn deref_mut(&mut self) -> &mut [Chunk<T>] {
        match self {
            ChunkList::One(chunk) => std::slice::from_mut(chunk),
            ChunkList::Many(chunks) => chunks,
        }
    }
}

impl<T> ChunkList<T> {
    /// Puts `chunks` in place of `range`, as `Vec::splice` does; a list left with one chunk
    /// keeps it inline.
    fn splice(&mut self, range: std::ops::Range<usize>, chunks: Vec<Chunk<T>>) {
        let mut all = match std::mem::replace(self, ChunkList::Many(Box::default())) {
            ChunkList::One(chunk) => vec![chunk],
            ChunkList::Many(all) => all.into_vec(),
        };
        // Exact: grown by doubling, a list would take room for up to twice its chunks.
        all.reserve_exact(chunks.len().saturating_sub(range.len()));
        all.splice(range, chunks);
        *self = match <[Chunk<T>; 1]>::try_from(all) {
            Ok([chunk]) => ChunkList::One(chunk),
            Err(all) => ChunkList::Many(all.into_boxed_slice()),
        };
    }
}

impl<T: Item> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let items: Vec<T> = items.into_iter().collect();
        let mut chunked = Chunked::default();
        chunked.splice_chunks(0, 0, items.chunks(CHUNK).map(Arc::from).collect());
        chunked
    }
}

impl<T: Item> std::ops::Index<usize> for Chunked<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        let (chunk, offset) = self.locate(index);
        &self.chunks[chunk].items[offset]
    }
}

impl<T: Item> Chunked<T> {
    pub fn len(&self) -> usize {
        self.chunks.last().map_or(0, Chunk::end)
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    pub fn group_count(&self) -> usize {
        self.chunks.last().map_or(0, Chunk::groups_end)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.items.iter())
    }

    /// The chunks' items, each chunk's shared.
    #[cfg(test)]
    pub fn chunks(&self) -> impl Iterator<Item = &Arc<[T]>> + '_ {
        self.chunks.iter().map(|chunk| &chunk.items)
    }

    /// The items as one slice: the lone chunk's, shared, or a copy of several chunks'.
    pub fn shared_slice(&self) -> Arc<[T]> {
        match &self.chunks {
            ChunkList::One(chunk) => Arc::clone(&chunk.items),
            ChunkList::Many(_) => self.iter().cloned().collect(),
        }
    }

    /// The number of items before the first for which `pred` is false (`pred` must be true
    /// of a prefix of the sequence only, as for a slice's `partition_point`).
    pub fn partition_point(&self, pred: impl Fn(&T) -> bool) -> usize {
        let chunk = self.chunks.partition_point(|chunk| chunk.items.last().is_some_and(&pred));
        match self.chunks.get(chunk) {
            Some(found) => self.start(chunk) + found.items.partition_point(pred),
            None => self.len(),
        }
    }

    /// Item `index` and its group: the groups opened by it and the items before it, less one.
    pub fn numbered(&self, index: usize) -> (usize, &T) {
        let (chunk, offset) = self.locate(index);
        let (groups_before, found) = (self.groups_start(chunk), &self.chunks[chunk]);
        if found.groups_end() - groups_before == found.items.len() {
            return (groups_before + offset, &found.items[offset]); // every item opens its group
        }
        let opened = found.items[..=offset].iter().filter(|item| item.opens_group()).count();
        (groups_before + opened - 1, &found.items[offset])
    }

    /// The index of the item that opens `group`, or the length if there is no such group.
    pub fn group_start(&self, group: usize) -> usize {
        let chunk = self.chunks.partition_point(|chunk| chunk.groups_end() <= group);
        let Some(found) = self.chunks.get(chunk) else { return self.len() };
        let nth = group - self.groups_start(chunk);
        let offset = found.items.iter().enumerate().filter(|(_, item)| item.opens_group()).nth(nth).map(|(offset, _)| offset);
        self.start(chunk) + offset.expect("the chunk opens the group")
    }

    pub fn insert(&mut self, index: usize, item: T) {
        assert!(index <= self.len(), "insertion index {index} past the end ({})", self.len());
        if self.chunks.is_empty() {
            self.splice_chunks(0, 0, vec![Arc::from([item])]);
            return;
        }
        let (chunk, offset) = if index == self.len() { (self.chunks.len() - 1, self.chunks.last().map_or(0, |c| c.items.len())) } else { self.locate(index) };
        let items = &self.chunks[chunk].items;
        let edited = items[..offset].iter().cloned().chain([item]).chain(items[offset..].iter().cloned()).collect();
        self.rewrite(chunk, edited);
    }

    pub fn remove(&mut self, index: usize) -> T {
        let (chunk, offset) = self.locate(index);
        let items = &self.chunks[chunk].items;
        let removed = items[offset].clone();
        let kept = items[..offset].iter().chain(&items[offset + 1..]).cloned().collect();
        self.rewrite(chunk, kept);
        removed
    }

    /// Changes the items of `range` with `edit`, copying each chunk they are in once.
    pub fn edit_range(&mut self, range: std::ops::Range<usize>, mut edit: impl FnMut(&mut T)) {
        if range.is_empty() {
            return;
        }
        let (first, _) = self.locate(range.start);
        let (last, _) = self.locate(range.end - 1);
        for chunk in first..=last {
            let start = self.start(chunk);
            let mut items = self.chunks[chunk].items.to_vec();
            let (from, to) = (range.start.saturating_sub(start), (range.end - start).min(items.len()));
            items[from..to].iter_mut().for_each(&mut edit);
            self.splice_chunks(chunk, chunk + 1, vec![items.into()]);
        }
    }

    /// The chunk and the offset in it of item `index`.
    fn locate(&self, index: usize) -> (usize, usize) {
        assert!(index < self.len(), "index {index} past the end ({})", self.len());
        let chunk = self.chunks.partition_point(|chunk| chunk.end() <= index);
        (chunk, index - self.start(chunk))
    }

    fn start(&self, chunk: usize) -> usize {
        chunk.checked_sub(1).map_or(0, |before| self.chunks[before].end())
    }

    fn groups_start(&self, chunk: usize) -> usize {
        chunk.checked_sub(1).map_or(0, |before| self.chunks[before].groups_end())
    }

    /// Puts `items` in place of chunk `chunk`: merged with a neighbour if few (none if none),
    /// split if many.
    fn rewrite(&mut self, chunk: usize, mut items: Vec<T>) {
        let (mut first, mut last) = (chunk, chunk + 1);
        if items.len() < CHUNK / 4 {
            if last < self.chunks.len() {
                items.extend(self.chunks[last].items.iter().cloned());
                last += 1;
            } else if first > 0 {
                first -= 1;
                items.splice(0..0, self.chunks[first].items.iter().cloned());
            }
        }
        let pieces = items.len().div_ceil(2 * CHUNK);
        let size = items.len().div_ceil(pieces.max(1));
        self.splice_chunks(first, last, items.chunks(size.max(1)).map(Arc::from).collect());
    }

    /// Replaces chunks `first..last` with `items` (none empty); the later chunks' ends move by
    /// what the new chunks hold beyond the old.
    fn splice_chunks(&mut self, first: usize, last: usize, items: Vec<Arc<[T]>>) {
        let (old_end, old_groups_end) = (self.start(last), self.groups_start(last));
        let (mut end, mut groups_end) = (self.start(first), self.groups_start(first));
        let chunks: Vec<Chunk<T>> = items
            .into_iter()
            .map(|items| {
                end += items.len();
                groups_end += items.iter().filter(|item| item.opens_group()).count();
                Chunk { items, end: end as u32, groups_end: groups_end as u32 }
            })
            .collect();
        let inserted = chunks.len();
        self.chunks.splice(first..last, chunks);
        for chunk in &mut self.chunks[first + inserted..] {
            chunk.end = (chunk.end() - old_end + end) as u32;
            chunk.groups_end = (chunk.groups_end() - old_groups_end + groups_end) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Value {
        value: u32,
        opens: bool,
    }

    impl Item for Value {
        fn opens_group(&self) -> bool {
            self.opens
        }
    }

    #[derive(Debug, Clone)]
    enum Edit {
        /// At its sorted place, so that `partition_point` can be checked.
        Insert(Value),
        Remove(prop::sample::Index),
        /// Every item of a range opens a group (or no longer does).
        Flip(prop::sample::Index, usize),
    }

    fn check(chunked: &Chunked<Value>, reference: &[Value]) -> Result<(), TestCaseError> {
        prop_assert_eq!(chunked.iter().copied().collect::<Vec<_>>(), reference);
        prop_assert_eq!(chunked.iter().rev().count(), reference.len());
        prop_assert_eq!(chunked.len(), reference.len());
        prop_assert!(chunked.chunks.iter().all(|chunk| !chunk.items.is_empty() && chunk.items.len() <= 2 * CHUNK + CHUNK / 4));
        let mut group = 0;
        for (index, item) in reference.iter().enumerate() {
            prop_assert_eq!(chunked[index], *item);
            if item.opens {
                prop_assert_eq!(chunked.group_start(group), index);
                group += 1;
            }
            if group > 0 {
                prop_assert_eq!(chunked.numbered(index), (group - 1, item));
            }
        }
        prop_assert_eq!((chunked.group_count(), chunked.group_start(group)), (group, reference.len()));
        for threshold in [0, 500, 1000, 1001, u32::MAX] {
            prop_assert_eq!(chunked.partition_point(|item| item.value < threshold), reference.partition_point(|item| item.value < threshold));
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn chunked_sequences_agree_with_a_vec_and_clones_keep_theirs(
            start in proptest::collection::vec((0u32..1000, any::<bool>()), 0..700),
            edits in proptest::collection::vec(prop_oneof![
                (0u32..1000, any::<bool>()).prop_map(|(value, opens)| Edit::Insert(Value { value, opens })),
                any::<prop::sample::Index>().prop_map(Edit::Remove),
                (any::<prop::sample::Index>(), 0usize..300).prop_map(|(at, len)| Edit::Flip(at, len)),
            ], 0..300),
        ) {
            let mut reference: Vec<Value> = start.into_iter().map(|(value, opens)| Value { value, opens }).collect();
            reference.sort_by_key(|item| item.value);
            let mut chunked: Chunked<Value> = reference.iter().copied().collect();
            check(&chunked, &reference)?;
            for edit in edits {
                let (before, before_reference) = (chunked.clone(), reference.clone());
                match edit {
                    Edit::Insert(item) => {
                        let at = reference.partition_point(|other| other.value < item.value);
                        reference.insert(at, item);
                        chunked.insert(at, item);
                    }
                    Edit::Remove(_) if reference.is_empty() => continue,
                    Edit::Remove(at) => {
                        let at = at.index(reference.len());
                        prop_assert_eq!(chunked.remove(at), reference.remove(at));
                    }
                    Edit::Flip(at, len) => {
                        let start = at.index(reference.len() + 1);
                        let range = start..(start + len).min(reference.len());
                        reference[range.clone()].iter_mut().for_each(|item| item.opens = !item.opens);
                        chunked.edit_range(range, |item| item.opens = !item.opens);
                    }
                }
                check(&chunked, &reference)?;
                check(&before, &before_reference)?;
                let shared = chunked.chunks.iter().filter(|chunk| before.chunks.iter().any(|old| Arc::ptr_eq(&old.items, &chunk.items))).count();
                prop_assert!(shared + 2 + len_chunks(&edit) >= before.chunks.len(), "{} of {} chunks shared", shared, before.chunks.len());
            }
        }
    }

    #[test]
    fn a_lone_chunk_is_kept_inline_and_a_list_that_shrinks_to_one_chunk_gives_its_allocation_back() {
        assert_eq!(std::mem::size_of::<ChunkList<Value>>(), 24);
        let value = |value: u32| Value { value, opens: true };
        let mut chunked: Chunked<Value> = (0..10).map(value).collect();
        assert!(matches!(chunked.chunks, ChunkList::One(_)));
        for at in 10..3 * CHUNK as u32 {
            chunked.insert(at as usize, value(at));
        }
        assert!(matches!(&chunked.chunks, ChunkList::Many(list) if list.len() > 1));
        while chunked.len() > 10 {
            chunked.remove(chunked.len() - 1);
        }
        assert!(matches!(chunked.chunks, ChunkList::One(_)));
        assert_eq!(chunked.iter().map(|item| item.value).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
    }

    /// How many chunks an edit may copy beyond the two an insertion or removal may.
    fn len_chunks(edit: &Edit) -> usize {
        match edit {
            Edit::Flip(_, len) => len / (CHUNK / 4) + 2,
            _ => 0,
        }
    }
}
