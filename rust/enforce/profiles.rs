//! Contracts as the data path reads them ([`Profile`]), each computed once and numbered
//! ([`Profiles`]); and the numbering made afresh when contracts replaced one by one have left
//! more profiles than the stages read ([`Enforcer::compact_profiles`]).

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use super::{ColorAction, Contract, Count, Enforcer, MeterSpec, Outcome, NO_CONTRACT};
use crate::meter::MeterConsts;
use crate::shaping::ShaperConsts;

/// What the data path needs of a contract, computed once and shared by every stage that
/// enforces an equal one (a million tenants on a few contracts read a few profiles). The
/// contract itself is not kept: [`Profile::contract`] gives it back from these.
#[derive(Debug, Clone)]
pub(super) struct Profile {
    pub(super) meter: Option<MeterConsts>,
    pub(super) shaper: Option<ShaperConsts>,
    /// The meter's: the bytes it counts and its colour actions (as the spec gives them, and in
    /// a form read without a branch).
    pub(super) meter_count: Count,
    pub(super) actions: [ColorAction; 3],
    pub(super) by_color: ColorActions,
}

impl Profile {
    fn new(contract: &Contract) -> Self {
        // Without a meter, neither is read.
        let (meter_count, actions) = contract.meter.map_or((Count::Inner, [ColorAction::Pass; 3]), |m| (m.count, m.actions));
        Profile {
            meter: contract.meter.map(|m| MeterConsts::new(&m.params)),
            shaper: contract.shaper.as_ref().map(ShaperConsts::new),
            meter_count,
            actions,
            by_color: ColorActions::new(&actions),
        }
    }

    pub(super) fn contract(&self) -> Contract {
        let meter = self.meter.map(|m| MeterSpec { params: m.params(), count: self.meter_count, actions: self.actions });
        Contract { meter, shaper: self.shaper.map(|s| s.params) }
    }

    /// The fast lane's: a meter and a shaper.
    pub(super) fn meter_and_shaper(&self) -> Option<(&MeterConsts, &ShaperConsts)> {
        self.meter.as_ref().zip(self.shaper.as_ref())
    }
}

/// A meter's colour actions, by colour, in a form read without a branch.
#[derive(Debug, Clone, Copy)]
pub(super) struct ColorActions {
    /// What becomes of a packet of the colour if the shapers send it (`DropMeter` if they never
    /// see it).
    pub(super) outcome: [Outcome; 3],
    /// The DSCP a remark writes.
    pub(super) remark: [Option<u8>; 3],
}

impl ColorActions {
    fn new(actions: &[ColorAction; 3]) -> Self {
        ColorActions {
            outcome: actions.map(|a| match a {
                ColorAction::Pass => Outcome::Pass,
                ColorAction::Remark(_) => Outcome::Remarked,
                ColorAction::Drop => Outcome::DropMeter,
            }),
            remark: actions.map(|a| match a {
                ColorAction::Remark(dscp) => Some(dscp),
                ColorAction::Pass | ColorAction::Drop => None,
            }),
        }
    }
}

/// Profiles by contract, numbered as they are first asked for. The index holds numbers only
/// (a contract is ~100 bytes, and tenants of distinct contracts have a profile each).
#[derive(Debug, Default)]
pub(super) struct Profiles {
    list: Vec<Profile>,
    index: HashTable<u32>,
}

impl Profiles {
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    /// The bytes packets read at random, with a profile each for tenants of distinct contracts.
    pub(super) fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.list.as_slice())
    }

    /// Starts loading profile `profile` (if there is one), which spans two or three cache
    /// lines; only when the profiles are too many to stay in the caches (tenants on a few
    /// contracts read a few, and the prefetches would cost ~4 ns a packet for nothing).
    #[inline]
    pub(super) fn prefetch(&self, profile: u32) {
        const CACHED_PROFILES: usize = 4096;
        if self.list.len() <= CACHED_PROFILES {
            return;
        }
        if let Some(profile) = self.list.get(profile as usize) {
            crate::memory::prefetch_whole(profile);
        }
    }

    /// Keeps room for `room` more profiles and lets the rest of the list's slack go: it grows by
    /// doubling, and a tenant of its own contract has a profile (92 bytes a tenant at 10,000).
    pub(super) fn shrink_to(&mut self, room: usize) {
        self.list.shrink_to(self.list.len() + room);
    }

    pub(super) fn of(&mut self, contract: &Contract) -> u32 {
        let Profiles { list, index } = self;
        let hash = FxBuildHasher.hash_one(contract);
        let rehash = |&at: &u32| FxBuildHasher.hash_one(list[at as usize].contract());
        let entry = index.entry(hash, |&at| list[at as usize].contract() == *contract, rehash);
        *entry
            .or_insert_with(|| {
                list.push(Profile::new(contract));
                (list.len() - 1) as u32
            })
            .get()
    }
}

impl std::ops::Index<usize> for Profiles {
    type Output = Profile;

    #[inline]
    fn index(&self, profile: usize) -> &Profile {
        &self.list[profile]
    }
}

impl Enforcer {
    /// Renumbers the profiles ([`Enforcer::compact_profiles`]) once those made since the last
    /// numbering could be as many as the stages read: contracts replaced one by one leave their
    /// profiles behind. Amortised, a renumbering (one pass over the tenants) per tenants/8 new
    /// profiles at least.
    pub(super) fn compact_profiles_if_due(&mut self) {
        if self.profiles.len() > 2 * self.profiles_numbered + self.tenants.len() / 8 + 64 {
            self.compact_profiles();
        }
    }

    /// The profiles that a stage or a kept tenant's terms read, numbered afresh; the others go.
    fn compact_profiles(&mut self) {
        let old = std::mem::take(&mut self.profiles);
        let mut numbers = vec![NO_CONTRACT; old.len()];
        let profiles = &mut self.profiles;
        let mut renumber = |profile: &mut u32| {
            if *profile != NO_CONTRACT {
                let number = &mut numbers[*profile as usize];
                if *number == NO_CONTRACT {
                    *number = profiles.of(&old[*profile as usize].contract());
                }
                *profile = *number;
            }
        };
        for tenant in &mut self.tenants {
            renumber(&mut tenant.stage.profile);
        }
        for stage in &mut self.class_stages {
            renumber(&mut stage.profile);
        }
        self.adaptive.renumber_profiles(&mut renumber);
        self.terms.renumber(&mut self.contracts, &mut renumber);
        self.profiles.shrink_to(super::update::room_for(self.profiles.len()));
        self.profiles_numbered = self.profiles.len();
    }
}
