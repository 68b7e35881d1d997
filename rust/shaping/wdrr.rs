//! Strict priority over weighted deficit round robin, for the two phases of the port's
//! scheduler: bytes within a queue's guarantee, then bytes borrowed below its ceiling.
//!
//! Each (phase, priority) has a ring of the queues that may send in that phase, as an intrusive
//! doubly linked list (a queue leaves from anywhere in O(1)), and a bitmap finds the best
//! non-empty priority in O(1): thousands of queues cost nothing per decision. Deficit round
//! robin per Shreedhar & Varghese, one packet at a time: the queue at the head of the ring
//! starts its turn by adding its quantum to its deficit, sends while its head packet fits in the
//! deficit, then goes to the tail.

/// Which budget a packet is sent under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Within the queue's guarantee: served before any borrowing.
    Guaranteed = 0,
    /// Spare capacity, shared by weight, up to the queue's ceiling.
    Borrowed = 1,
}

const PHASES: [Phase; 2] = [Phase::Guaranteed, Phase::Borrowed];
const NONE: u32 = u32::MAX;
const PRIORITIES: usize = 256;

/// A queue's place in one phase's ring, and its deficit there.
#[derive(Debug, Clone, Copy)]
struct Slot {
    prev: u32,
    next: u32,
    deficit: u64,
}

const UNLINKED: Slot = Slot { prev: NONE, next: NONE, deficit: 0 };

/// A queue's standing in one phase's ring: apart from its [`Slot`], so that the two phases'
/// flags share the padding after the priority.
#[derive(Debug, Clone, Copy, Default)]
struct Standing {
    linked: bool,
    /// The queue's turn has begun (its quantum is in the deficit).
    in_turn: bool,
}

#[derive(Debug, Clone, Copy)]
struct Ring {
    head: u32,
    tail: u32,
}

const EMPTY_RING: Ring = Ring { head: NONE, tail: NONE };

/// Everything a decision reads about a queue: 48 bytes (a port's thousands of queues each
/// have one; a cache line each cost a quarter more).
#[derive(Debug, Clone, Copy)]
struct Entry {
    slots: [Slot; 2],
    quantum: u64,
    standing: [Standing; 2],
    priority: u8,
    /// The weight scale its quantum was made under ([`Scheduler::rescale`]).
    scale: u16,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 48);

impl Entry {
    fn new(priority: u8, quantum: u64, scale: u16) -> Self {
        Entry { slots: [UNLINKED; 2], quantum, standing: [Standing::default(); 2], priority, scale }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Scheduler {
    entries: Vec<Entry>,
    rings: [Vec<Ring>; 2],
    /// Bit p set: the ring of priority p is not empty.
    occupied: [[u64; PRIORITIES / 64]; 2],
    /// The port's weight scale, by number: a queue's quantum made under another is made again
    /// when its next turn begins, so that a new scale costs nothing until then.
    scale: u16,
}

impl Scheduler {
    /// A new scheduler of the same queues, priorities and quanta: every ring empty.
    pub(super) fn restarted(&self) -> Self {
        let mut fresh = Scheduler::new(self.entries.iter().map(|entry| (entry.priority, entry.quantum)));
        fresh.scale = self.scale;
        for (entry, old) in fresh.entries.iter_mut().zip(&self.entries) {
            entry.scale = old.scale;
        }
        fresh
    }

    /// A new weight scale: every quantum is made again at its queue's next turn. True when the
    /// numbering wrapped: the caller then sets every quantum ([`Scheduler::set_quantum`]), as
    /// one made 65,536 scales ago could not be told from a new one.
    pub(super) fn rescale(&mut self) -> bool {
        self.scale = self.scale.wrapping_add(1);
        self.scale == 0
    }

    /// One entry per queue: its priority and its quantum (bytes added per turn).
    pub(super) fn new(queues: impl Iterator<Item = (u8, u64)>) -> Self {
        Scheduler {
            entries: queues.map(|(priority, quantum)| Entry::new(priority, quantum, 0)).collect(),
            rings: [vec![EMPTY_RING; PRIORITIES], vec![EMPTY_RING; PRIORITIES]],
            occupied: [[0; PRIORITIES / 64]; 2],
            scale: 0,
        }
    }

    pub(super) fn reserve(&mut self, additional: usize) {
        self.entries.reserve_exact(additional);
    }

    pub(super) fn is_linked(&self, phase: Phase, queue: u32) -> bool {
        self.entries[queue as usize].standing[phase as usize].linked
    }

    /// Whether any queue may send in `phase`.
    #[inline]
    pub(super) fn any(&self, phase: Phase) -> bool {
        self.occupied[phase as usize].iter().any(|&word| word != 0)
    }

    /// Puts `queue` at the tail of its priority's ring (it waits for everyone already there).
    pub(super) fn join(&mut self, phase: Phase, queue: u32) {
        let p = phase as usize;
        let priority = self.entries[queue as usize].priority as usize;
        let tail = self.rings[p][priority].tail;
        let entry = &mut self.entries[queue as usize];
        debug_assert!(!entry.standing[p].linked);
        entry.slots[p] = Slot { prev: tail, next: NONE, deficit: entry.slots[p].deficit };
        entry.standing[p] = Standing { linked: true, in_turn: false };
        if tail == NONE {
            self.rings[p][priority].head = queue;
            self.occupied[p][priority / 64] |= 1 << (priority % 64);
        } else {
            self.entries[tail as usize].slots[p].next = queue;
        }
        self.rings[p][priority].tail = queue;
    }

    /// Takes `queue` out of the ring: its turn ends, its deficit stays for its next turn.
    pub(super) fn leave(&mut self, phase: Phase, queue: u32) {
        let p = phase as usize;
        let priority = self.entries[queue as usize].priority as usize;
        let Slot { prev, next, .. } = self.entries[queue as usize].slots[p];
        match prev {
            NONE => self.rings[p][priority].head = next,
            prev => self.entries[prev as usize].slots[p].next = next,
        }
        match next {
            NONE => self.rings[p][priority].tail = prev,
            next => self.entries[next as usize].slots[p].prev = prev,
        }
        if self.rings[p][priority].head == NONE {
            self.occupied[p][priority / 64] &= !(1 << (priority % 64));
        }
        let entry = &mut self.entries[queue as usize];
        entry.slots[p] = Slot { deficit: entry.slots[p].deficit, ..UNLINKED };
        entry.standing[p] = Standing::default();
    }

    /// Gives `queue` its quantum under the current scale.
    pub(super) fn set_quantum(&mut self, queue: u32, quantum: u64) {
        let entry = &mut self.entries[queue as usize];
        (entry.quantum, entry.scale) = (quantum, self.scale);
    }

    /// Gives `queue` a new priority and quantum. A queue whose priority changed moves to the
    /// tail of its new priority's rings (its turn ends there); its deficit stays.
    pub(super) fn set_share(&mut self, queue: u32, priority: u8, quantum: u64) {
        self.set_quantum(queue, quantum);
        if self.entries[queue as usize].priority == priority {
            return;
        }
        let linked = PHASES.map(|phase| self.is_linked(phase, queue));
        for (phase, _) in PHASES.into_iter().zip(linked).filter(|(_, linked)| *linked) {
            self.leave(phase, queue);
        }
        self.entries[queue as usize].priority = priority;
        for (phase, _) in PHASES.into_iter().zip(linked).filter(|(_, linked)| *linked) {
            self.join(phase, queue);
        }
    }

    /// Gives queues `first..end` (in no ring; new ones at the end) `shares` (priority, quantum).
    pub(super) fn place(&mut self, first: u32, end: u32, shares: impl Iterator<Item = (u8, u64)>) {
        debug_assert!((first..end.min(self.entries.len() as u32)).all(|queue| PHASES.iter().all(|&phase| !self.is_linked(phase, queue))));
        let scale = self.scale;
        if self.entries.len() < end as usize {
            self.entries.resize(end as usize, Entry::new(0, 0, scale));
        }
        for (entry, (priority, quantum)) in self.entries[first as usize..end as usize].iter_mut().zip(shares) {
            *entry = Entry::new(priority, quantum, scale);
        }
    }

    /// Numbers the queues afresh: queue `order[i]` becomes queue `i` (`new_index` is the
    /// inverse: `u32::MAX` for a queue that goes, which is in no ring), keeping its places.
    pub(super) fn reorder(&mut self, order: &[u32], new_index: &[u32]) {
        self.renumber(|queue| new_index[queue as usize]);
        self.entries = order.iter().map(|&old| self.entries[old as usize]).collect();
    }

    /// Every queue number the rings hold, through `renumber`: only the queues in a ring hold
    /// numbers, so they are walked ring by ring, not every queue.
    fn renumber(&mut self, renumber: impl Fn(u32) -> u32) {
        let renumber = |queue: &mut u32| {
            if *queue != NONE {
                *queue = renumber(*queue);
            }
        };
        for (p, rings) in self.rings.iter_mut().enumerate() {
            for ring in rings.iter_mut().filter(|ring| ring.head != NONE) {
                let mut queue = ring.head;
                while queue != NONE {
                    let slot = &mut self.entries[queue as usize].slots[p];
                    queue = slot.next;
                    renumber(&mut slot.prev);
                    renumber(&mut slot.next);
                }
                renumber(&mut ring.head);
                renumber(&mut ring.tail);
            }
        }
    }

    /// Out of every ring with no credit left: for a queue that has emptied.
    pub(super) fn retire(&mut self, queue: u32) {
        for phase in PHASES {
            if self.is_linked(phase, queue) {
                self.leave(phase, queue);
            }
            self.entries[queue as usize].slots[phase as usize].deficit = 0;
        }
    }

    /// The next queue to send and the phase it sends under: the guaranteed phase if any queue
    /// may send in it, the best priority there, and that ring's deficit round robin. The
    /// packet's size is taken from the queue's deficit. `head_bytes` gives a queue's head packet,
    /// `quantum` its quantum under the current scale.
    #[inline]
    pub(super) fn pick(&mut self, head_bytes: impl Fn(u32) -> u32, quantum: impl Fn(u32) -> u64) -> Option<(Phase, u32)> {
        let phase = PHASES.into_iter().find(|&phase| self.any(phase))?;
        let p = phase as usize;
        let priority = self.best_priority(phase);
        let scale = self.scale;
        loop {
            let queue = self.rings[p][priority].head;
            let entry = &mut self.entries[queue as usize];
            if !entry.standing[p].in_turn {
                entry.standing[p].in_turn = true;
                if entry.scale != scale {
                    (entry.quantum, entry.scale) = (quantum(queue), scale);
                }
                entry.slots[p].deficit += entry.quantum;
            }
            let slot = &mut entry.slots[p];
            let bytes = u64::from(head_bytes(queue));
            if bytes <= slot.deficit {
                slot.deficit -= bytes;
                return Some((phase, queue));
            }
            self.end_turn(p, priority);
        }
    }

    fn best_priority(&self, phase: Phase) -> usize {
        let (word, bits) = self.occupied[phase as usize].iter().enumerate().find(|(_, &bits)| bits != 0).expect("phase has a queue");
        word * 64 + bits.trailing_zeros() as usize
    }

    /// The head queue's turn is over: it goes to the tail with what is left of its deficit.
    fn end_turn(&mut self, p: usize, priority: usize) {
        let ring = self.rings[p][priority];
        let queue = ring.head;
        self.entries[queue as usize].standing[p].in_turn = false;
        if ring.tail == queue {
            return;
        }
        let next = self.entries[queue as usize].slots[p].next;
        self.entries[next as usize].slots[p].prev = NONE;
        self.entries[ring.tail as usize].slots[p].next = queue;
        self.entries[queue as usize].slots[p].prev = ring.tail;
        self.entries[queue as usize].slots[p].next = NONE;
        self.rings[p][priority] = Ring { head: next, tail: queue };
    }
}
