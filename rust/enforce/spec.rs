//! What enforcement is given: a policy's contracts per tenant and class ([`QosSpec`]), and what
//! it reads of each packet besides its verdict ([`Arrival`]).

use std::hint::select_unpredictable;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::bursts::BurstSpec;
use crate::codes::codes;
use crate::error::CoreError;
use crate::meter::{Color, MeterParams};
use crate::parse::PacketInfo;
use crate::shaping::port::check_queues;
use crate::shaping::{Port, PortConfig, QueueConfig, ShaperParams, WeightScale};

codes! {
    /// Which bytes of a packet meters, shapers and the port count (`COUNT_MODES` in Python).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Count: "byte count" {
        /// The tenant's frame inside the tunnel.
        Inner = 0,
        /// The frame as captured, tunnel headers included.
        Outer = 1,
        /// Outer + 20 B of preamble, start delimiter and inter-frame gap.
        Wire = 2,
        /// Wire + the 4-byte FCS that captures do not hold.
        WireFcs = 3,
    }
}

impl Count {
    /// Without a branch (a `match` here compiles to a jump, taken twice a packet).
    #[inline]
    pub fn bytes(self, arrival: &Arrival) -> u32 {
        const ADDED: [u32; 4] = [0, 0, 20, 24];
        let frame = select_unpredictable(self == Count::Inner, arrival.inner_len, arrival.wire_len);
        frame.saturating_add(ADDED[self as usize])
    }
}

/// What enforcement reads of a packet besides its verdict.
#[derive(Debug, Clone, Copy, Default)]
pub struct Arrival {
    /// The packet's time: the latest timestamp of the stream up to it.
    pub clock_ns: u64,
    pub wire_len: u32,
    pub inner_len: u32,
    pub dscp: u8,
}

impl Arrival {
    #[inline]
    pub fn of(info: &PacketInfo, clock_ns: u64) -> Arrival {
        Arrival { clock_ns, wire_len: info.wire_len, inner_len: info.inner_len, dscp: info.dscp }
    }
}

/// What a meter does with a packet of one colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColorAction {
    Pass,
    /// Pass with the DSCP rewritten (0-63).
    Remark(u8),
    Drop,
}

codes! {
    /// A [`ColorAction`] in the compiled arrays (`MeterArrays.action`, `COLOR_ACTIONS` in
    /// Python); a remark's DSCP is a column of its own.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ColorActionCode: "meter action" {
        Pass = 0,
        Remark = 1,
        Drop = 2,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeterSpec {
    pub params: MeterParams,
    pub count: Count,
    /// For green, yellow, red.
    pub actions: [ColorAction; 3],
}

/// A tenant's or a class's meter and shaper; either may be absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Contract {
    pub meter: Option<MeterSpec>,
    pub shaper: Option<ShaperParams>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClassQos {
    pub contract: Contract,
    /// The class's queue at the port (used only when the policy has a port).
    pub queue: QueueConfig,
    /// What it switches to while its own microburst lasts (boxed: rare, and the class is
    /// kept per tenant).
    pub on_burst: Option<Box<ClassBurstProfile>>,
}

/// The profile a class takes when a rate event of its microburst scope starts: its contract
/// and its port queue meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClassBurstProfile {
    pub contract: Contract,
    pub queue: QueueConfig,
    pub hold_ns: u64,
    /// At most this many switches into it in any second of packet time; 0: no limit.
    pub max_switches_per_s: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantQos {
    /// Shared with the engine's tables (a tenant's name is held once).
    pub name: Arc<str>,
    pub contract: Contract,
    /// By class id (the verdicts' `cls`).
    pub classes: Vec<ClassQos>,
    /// What it switches to while its microburst lasts, and while the port is overloaded
    /// (boxed: rare, and the contract is kept per tenant).
    pub on_burst: Option<Box<BurstProfile>>,
    pub on_overload: Option<Box<ProfileQos>>,
}

/// A tenant's contract and its classes' port queues under one of its adaptive profiles
/// (docs/qos.md, "Adaptive profiles").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProfileQos {
    pub contract: Contract,
    /// By class id, as the classes' queues (used only when the policy has a port).
    pub queues: Vec<QueueConfig>,
}

/// The profile a tenant takes when a rate event of its microburst scope starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BurstProfile {
    pub profile: ProfileQos,
    /// How long it keeps the profile after the event ends.
    pub hold_ns: u64,
    /// At most this many switches into it in any second of packet time; 0: no limit.
    pub max_switches_per_s: u32,
}

/// When the port is overloaded: from the arrival after which more than `above_bytes` wait in
/// its buffer until they fall to `below_bytes`; then tenants return one every `stagger_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overload {
    pub above_bytes: u64,
    pub below_bytes: u64,
    pub stagger_ns: u64,
}

impl Overload {
    /// Whether its thresholds fit a buffer of `buffer_bytes`: below <= above < the buffer.
    pub fn fits(&self, buffer_bytes: u64) -> bool {
        self.below_bytes <= self.above_bytes && self.above_bytes < buffer_bytes
    }
}

/// A policy's QoS: matched to the engine's tenants by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosSpec {
    /// Bytes that shapers and the port count (meters say their own).
    pub count: Count,
    /// A packet's colour on arrival, by DSCP, for colour-aware meters.
    pub color_map: [Color; 64],
    pub port: Option<PortConfig>,
    /// How the queues' shares become units of weight at the port.
    pub weight_scale: WeightScale,
    pub tenants: Vec<TenantQos>,
    /// Microburst detection (docs/bursts.md): which scopes, and the polled views.
    pub bursts: BurstSpec,
    pub overload: Option<Overload>,
}

impl Default for QosSpec {
    /// No contracts: every classified packet passes, green.
    fn default() -> Self {
        QosSpec {
            count: Count::Outer,
            color_map: [Color::Green; 64],
            port: None,
            weight_scale: WeightScale::default(),
            tenants: Vec::new(),
            bursts: BurstSpec::default(),
            overload: None,
        }
    }
}

impl QosSpec {
    /// Rejects what the meters, shapers or port would refuse, naming the tenant and class.
    pub fn check(&self) -> Result<(), CoreError> {
        let mut seen = FxHashMap::default();
        for tenant in &self.tenants {
            if seen.insert(&*tenant.name, ()).is_some() {
                return Err(CoreError::spec(format!("tenant '{}' appears twice", tenant.name)));
            }
            check_contract(&tenant.contract).map_err(|err| err.within(format!("tenant '{}'", tenant.name)))?;
            for (index, class) in tenant.classes.iter().enumerate() {
                check_contract(&class.contract).map_err(|err| err.within(format!("tenant '{}', class {index}", tenant.name)))?;
            }
            self.check_profiles(tenant).map_err(|err| err.within(format!("tenant '{}'", tenant.name)))?;
        }
        if let Some(overload) = self.overload {
            let Some(port) = self.port else { return Err(CoreError::spec("an overload setting needs a port")) };
            if !overload.fits(port.buffer_bytes) {
                return Err(CoreError::spec_at("port overload", "needs below <= above < the buffer"));
            }
        }
        if let Some(config) = self.port {
            Port::new(config, self.queues().map(|(_, _, queue)| queue).collect()).map_err(|err| err.within("port"))?;
        }
        self.bursts.check()?;
        let settings = self.bursts.tenants.iter().flat_map(|t| t.tenant.iter().chain(t.classes.iter().map(|(_, c)| c)));
        if self.port.is_none() && self.bursts.port.iter().chain(settings).any(|c| c.queue.is_some()) {
            return Err(CoreError::spec("a microburst queue view needs a port"));
        }
        Ok(())
    }

    /// A tenant's profiles: their contracts, a burst profile's microburst scope, an overload
    /// profile's overload setting, and their port queues.
    fn check_profiles(&self, tenant: &TenantQos) -> Result<(), CoreError> {
        if let Some(burst) = &tenant.on_burst {
            check_contract(&burst.profile.contract).map_err(|err| err.within("on_burst"))?;
            if !self.bursts.tenants.iter().any(|t| *t.name == *tenant.name && t.tenant.is_some()) {
                return Err(CoreError::spec_at("on_burst", "needs the tenant's microburst setting (its rate view starts the profile)"));
            }
        }
        if let Some(profile) = &tenant.on_overload {
            check_contract(&profile.contract).map_err(|err| err.within("on_overload"))?;
            if self.overload.is_none() {
                return Err(CoreError::spec_at("on_overload", "needs the port's overload setting"));
            }
        }
        for (cls, class) in tenant.classes.iter().enumerate() {
            let Some(burst) = &class.on_burst else { continue };
            let place = format!("class {cls}, on_burst");
            check_contract(&burst.contract).map_err(|err| err.within(place.clone()))?;
            if !self.bursts.tenants.iter().any(|t| *t.name == *tenant.name && t.classes.iter().any(|(c, _)| usize::from(*c) == cls)) {
                return Err(CoreError::spec_at(place, "needs the class's microburst setting (its rate view starts the profile)"));
            }
            let same_sums = burst.queue.guarantee == class.queue.guarantee && burst.queue.reserved_bytes == class.queue.reserved_bytes;
            if let (Some(config), true) = (self.port, same_sums) {
                check_queues(&config, &[burst.queue]).map_err(|err| err.within(place.clone()))?;
            } else if !same_sums {
                return Err(CoreError::spec_at(place, "a profile may not change a queue's guarantee or reserve"));
            }
        }
        let Some(config) = self.port else { return Ok(()) };
        for (name, profile) in [("on_burst", tenant.on_burst.as_ref().map(|b| &b.profile)), ("on_overload", tenant.on_overload.as_deref())] {
            let Some(profile) = profile else { continue };
            if profile.queues.len() != tenant.classes.len() {
                return Err(CoreError::spec_at(name, format!("{} queues for {} classes", profile.queues.len(), tenant.classes.len())));
            }
            // A profile keeps each queue's guarantee and reserve, so the port's sums stand.
            let same_sums =
                profile.queues.iter().zip(&tenant.classes).all(|(p, c)| p.guarantee == c.queue.guarantee && p.reserved_bytes == c.queue.reserved_bytes);
            if !same_sums {
                return Err(CoreError::spec_at(name, "a profile may not change a queue's guarantee or reserve"));
            }
            check_queues(&config, &profile.queues).map_err(|err| err.within(format!("{name}, port")))?;
        }
        Ok(())
    }

    /// Every class's port queue, tenant by tenant: (tenant, class id, queue).
    fn queues(&self) -> impl Iterator<Item = (&str, u16, QueueConfig)> {
        self.tenants.iter().flat_map(|t| t.classes.iter().enumerate().map(|(c, class)| (&*t.name, c as u16, class.queue)))
    }
}

fn check_contract(contract: &Contract) -> Result<(), CoreError> {
    if let Some(meter) = &contract.meter {
        meter.params.check().map_err(|err| err.within("meter"))?;
        if let Some(dscp) = meter.actions.iter().find_map(|a| match a {
            ColorAction::Remark(dscp) if *dscp > 63 => Some(dscp),
            _ => None,
        }) {
            return Err(CoreError::spec(format!("meter: remark to DSCP {dscp}, above 63")));
        }
    }
    if let Some(shaper) = &contract.shaper {
        shaper.check().map_err(|err| err.within("shaper"))?;
    }
    Ok(())
}
