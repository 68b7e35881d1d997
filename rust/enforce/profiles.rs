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
/// contract itself is not kept: [`ProfileRef::contract`] gives it back from these. Its shaper's
/// constants are kept beside it only if it has a shaper ([`Shaped`]): a profile of a meter
/// alone takes 56 bytes, not 144 (tenants of distinct meters have a profile each).
#[derive(Debug, Clone)]
pub(super) struct Profile {
    pub(super) meter: Option<MeterConsts>,
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
        Profile { meter: contract.meter.map(|m| MeterConsts::new(&m.params)), meter_count, actions, by_color: ColorActions::new(&actions) }
    }
}

/// The profile of a contract with a shaper.
#[derive(Debug, Clone)]
struct Shaped {
    profile: Profile,
    shaper: ShaperConsts,
}

/// A profile as the data path reads it: the profile, and its shaper's constants if it has one.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProfileRef<'a> {
    pub(super) profile: &'a Profile,
    pub(super) shaper: Option<&'a ShaperConsts>,
}

impl ProfileRef<'_> {
    pub(super) fn contract(&self) -> Contract {
        let Profile { meter, meter_count, actions, .. } = *self.profile;
        let meter = meter.map(|m| MeterSpec { params: m.params(), count: meter_count, actions });
        Contract { meter, shaper: self.shaper.map(|s| s.params) }
    }

    /// The fast lane's: a meter and a shaper.
    pub(super) fn meter_and_shaper(&self) -> Option<(&MeterConsts, &ShaperConsts)> {
        self.profile.meter.as_ref().zip(self.shaper)
    }
}

impl std::ops::Deref for ProfileRef<'_> {
    type Target = Profile;

    fn deref(&self) -> &Profile {
        self.profile
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

/// Profiles by contract, numbered as they are first asked for: those of contracts with a
/// shaper apart, their numbers marked with [`SHAPED`]. The index holds numbers only (a contract
/// is ~100 bytes, and tenants of distinct contracts have a profile each).
#[derive(Debug, Default)]
pub(super) struct Profiles {
    plain: Vec<Profile>,
    shaped: Vec<Shaped>,
    index: HashTable<u32>,
}

/// The mark of a profile number in [`Profiles`]'s list of profiles with a shaper.
const SHAPED: u32 = 1 << 31;

impl Profiles {
    pub(super) fn len(&self) -> usize {
        self.plain.len() + self.shaped.len()
    }

    /// The bytes packets read at random, with a profile each for tenants of distinct contracts.
    pub(super) fn state_bytes(&self) -> usize {
        std::mem::size_of_val(self.plain.as_slice()) + std::mem::size_of_val(self.shaped.as_slice())
    }

    /// Profile `number`, which [`Profiles::of`] gave.
    #[inline]
    pub(super) fn get(&self, number: u32) -> ProfileRef<'_> {
        profile_in(&self.plain, &self.shaped, number)
    }

    /// Profile `number`'s place among all the profiles, below [`Profiles::len`].
    pub(super) fn position(&self, number: u32) -> usize {
        if number & SHAPED == 0 {
            number as usize
        } else {
            self.plain.len() + (number & !SHAPED) as usize
        }
    }

    /// Starts loading profile `profile` (if there is one), which spans one to three cache
    /// lines; only when the profiles are too many to stay in the caches (tenants on a few
    /// contracts read a few, and the prefetches would cost ~4 ns a packet for nothing).
    #[inline]
    pub(super) fn prefetch(&self, profile: u32) {
        const CACHED_PROFILES: usize = 4096;
        if self.len() <= CACHED_PROFILES {
            return;
        }
        if profile & SHAPED == 0 {
            if let Some(profile) = self.plain.get(profile as usize) {
                crate::memory::prefetch_whole(profile);
            }
        } else if let Some(shaped) = self.shaped.get((profile & !SHAPED) as usize) {
            crate::memory::prefetch_whole(shaped);
        }
    }

    /// Keeps room for `room(n)` more profiles in each list of `n` and lets the rest of its
    /// slack go: a list grows by doubling, and a tenant of its own contract has a profile.
    pub(super) fn shrink_to(&mut self, room: impl Fn(usize) -> usize) {
        self.plain.shrink_to(self.plain.len() + room(self.plain.len()));
        self.shaped.shrink_to(self.shaped.len() + room(self.shaped.len()));
    }

    pub(super) fn of(&mut self, contract: &Contract) -> u32 {
        let hash = FxBuildHasher.hash_one(contract);
        let Profiles { plain, shaped, index } = self;
        let contract_of = |at: u32| profile_in(plain, shaped, at).contract();
        let entry = index.entry(hash, |&at| contract_of(at) == *contract, |&at| FxBuildHasher.hash_one(contract_of(at)));
        *entry
            .or_insert_with(|| {
                let profile = Profile::new(contract);
                match contract.shaper.as_ref() {
                    None => {
                        plain.push(profile);
                        (plain.len() - 1) as u32
                    }
                    Some(shaper) => {
                        shaped.push(Shaped { profile, shaper: ShaperConsts::new(shaper) });
                        (shaped.len() - 1) as u32 | SHAPED
                    }
                }
            })
            .get()
    }
}

/// [`Profiles::get`] on its lists (so that its index can be borrowed apart).
#[inline]
fn profile_in<'a>(plain: &'a [Profile], shaped: &'a [Shaped], number: u32) -> ProfileRef<'a> {
    if number & SHAPED == 0 {
        ProfileRef { profile: &plain[number as usize], shaper: None }
    } else {
        let shaped = &shaped[(number & !SHAPED) as usize];
        ProfileRef { profile: &shaped.profile, shaper: Some(&shaped.shaper) }
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
                let number = &mut numbers[old.position(*profile)];
                if *number == NO_CONTRACT {
                    *number = profiles.of(&old.get(*profile).contract());
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
        self.profiles.shrink_to(super::update::room_for);
        self.profiles_numbered = self.profiles.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::{MeterKind, MeterParams};
    use crate::shaping::ShaperParams;

    #[test]
    fn contracts_with_a_shaper_and_without_are_numbered_apart_and_give_their_contracts_back() {
        let meter =
            |cir| MeterSpec { params: MeterParams::blind(MeterKind::SrTcm { cir, cbs: 100, ebs: 0 }), count: Count::Outer, actions: [ColorAction::Drop; 3] };
        let shaper = ShaperParams { rate: 500, burst: 100, max_queue_bytes: 1000, max_delay_ns: 7 };
        let contracts = [
            Contract { meter: Some(meter(1)), shaper: None },
            Contract { meter: Some(meter(1)), shaper: Some(shaper) },
            Contract { meter: None, shaper: Some(shaper) },
            Contract { meter: Some(meter(2)), shaper: None },
        ];
        let mut profiles = Profiles::default();
        let numbers: Vec<u32> = contracts.iter().map(|c| profiles.of(c)).collect();
        assert_eq!(numbers, contracts.iter().map(|c| profiles.of(c)).collect::<Vec<_>>(), "an equal contract, the same profile");
        for (contract, &number) in contracts.iter().zip(&numbers) {
            assert_eq!(profiles.get(number).contract(), *contract);
            assert_eq!(profiles.get(number).meter_and_shaper().is_some(), contract.meter.is_some() && contract.shaper.is_some());
        }
        let mut positions: Vec<usize> = numbers.iter().map(|&n| profiles.position(n)).collect();
        positions.sort_unstable();
        assert_eq!(positions, [0, 1, 2, 3]);
        assert_eq!(profiles.state_bytes(), 2 * size_of::<Profile>() + 2 * size_of::<Shaped>());
        assert!(size_of::<Profile>() <= 64, "a profile without a shaper in a cache line: {} bytes", size_of::<Profile>());
    }
}
