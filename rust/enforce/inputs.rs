//! What the policy compiler gives per tenant (Python's `isolane.policy.TenantQos`, read as is
//! through `FromPyObject` when the `python` feature is on), and how it becomes a [`QosSpec`]:
//! the port queue of each class (its guarantee, burst, weight and reserve) is worked out here,
//! beside the contracts that use it (docs/qos.md, "The port in the engine").

use std::sync::Arc;

use super::shared::Shared;
use super::{BurstProfile, ClassBurstProfile, ClassQos, ColorAction, ColorActionCode, Contract, Count, MeterSpec, Overload, ProfileQos, QosSpec, TenantQos};
use crate::bursts::{BurstConfig, BurstSpec, QueueThresholds, TenantBursts};
use crate::chunked_vec::GroupedVec;
use crate::error::CoreError;
use crate::meter::{Color, MeterKind, MeterKindCode, MeterParams};
use crate::shaping::{PortConfig, PortMode, QueueConfig, ShaperParams, WeightScale};

#[cfg(feature = "python")]
use pyo3::types::PyAnyMethods;
#[cfg(feature = "python")]
use pyo3::{Bound, FromPyObject, PyAny, PyErr, PyResult};

/// A field given as `T` or `None`, boxed.
#[cfg(feature = "python")]
fn boxed<'py, T>(given: &Bound<'py, PyAny>) -> PyResult<Option<Box<T>>>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    Ok(given.extract::<Option<T>>().map_err(Into::<PyErr>::into)?.map(Box::new))
}

/// A meter row, `None` if it has no meter.
#[cfg(feature = "python")]
fn meter_row(given: &Bound<'_, PyAny>) -> PyResult<Option<MeterRow>> {
    let row: MeterRow = given.extract()?;
    Ok((row.kind != MeterKindCode::None as u8).then_some(row))
}

/// The same, boxed (a class's meter: most classes have none).
#[cfg(feature = "python")]
fn boxed_meter_row(given: &Bound<'_, PyAny>) -> PyResult<Option<Box<MeterRow>>> {
    Ok(meter_row(given)?.map(Box::new))
}

/// A tenant's classes, in one allocation (which the [`InputPool`] shares).
#[cfg(feature = "python")]
fn class_list(given: &Bound<'_, PyAny>) -> PyResult<Arc<[ClassInput]>> {
    Ok(given.extract::<Vec<ClassInput>>()?.into())
}

/// A shaper row, `None` if it has no shaper.
#[cfg(feature = "python")]
fn shaper_row(given: &Bound<'_, PyAny>) -> PyResult<Option<Box<ShaperRow>>> {
    let row: ShaperRow = given.extract()?;
    Ok((row.rate > 0).then(|| Box::new(row)))
}

/// A meter, every default filled in (`kind` 0: none). Rates in bytes per second, sizes in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct MeterRow {
    /// 0 none, 1 srtcm, 2 trtcm, 3 rfc4115.
    pub kind: u8,
    pub color_aware: bool,
    /// [`Count`] code.
    pub byte_count: u8,
    pub cir: u64,
    pub cbs: u64,
    pub eir: u64,
    pub ebs: u64,
    pub pir: u64,
    pub pbs: u64,
    /// For green, yellow, red: 0 pass, 1 remark, 2 drop.
    pub actions: [u8; 3],
    /// The DSCP a remark action writes.
    pub remark_dscp: [u8; 3],
}

/// A shaper (`rate` 0: none), every default filled in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct ShaperRow {
    pub rate: u64,
    pub burst: u64,
    pub queue: u64,
    pub max_delay_ns: u64,
}

/// A scope's `microburst` setting, its threshold resolved to bit/s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct BurstRow {
    pub window_ns: u64,
    pub threshold_bps: u64,
    /// The queue view's rise and fall thresholds in bytes, if it has one.
    pub queue: Option<(u64, u64)>,
}

/// A class of a tenant: its contract and the inputs of its port queue (what is rare boxed: a
/// class is kept per tenant).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct ClassInput {
    pub priority: u8,
    pub weight: u32,
    /// Its own guarantee (bytes/s; 0 none), burst (`burst_given`: written in the policy) and
    /// ceiling (0 uncapped; else its tenant's).
    pub rate: u64,
    pub burst: u64,
    pub burst_given: bool,
    pub ceil: u64,
    /// `None`: no meter (a row of kind 0 as given); boxed, as most classes have none.
    #[cfg_attr(feature = "python", pyo3(from_py_with = boxed_meter_row))]
    pub meter: Option<Box<MeterRow>>,
    /// `None`: no shaper (a row of rate 0 as given).
    #[cfg_attr(feature = "python", pyo3(from_py_with = shaper_row))]
    pub shaper: Option<Box<ShaperRow>>,
    #[cfg_attr(feature = "python", pyo3(from_py_with = boxed))]
    pub microburst: Option<Box<BurstRow>>,
    #[cfg_attr(feature = "python", pyo3(from_py_with = boxed))]
    pub on_burst: Option<Box<ProfileInput>>,
}

/// An adaptive profile as the policy gives it: what it changes of the tenant's contract and
/// port queues (`None`: as the tenant has it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct ProfileInput {
    pub meter: Option<MeterRow>,
    pub shaper: Option<ShaperRow>,
    /// Every class queue's priority.
    pub priority: Option<u8>,
    /// The tenant's port weight.
    pub weight: Option<u32>,
    /// Every class queue capped at its guarantee: no borrowing.
    pub no_borrowing: bool,
    /// A burst profile's hold and switch limit (0: none).
    pub hold_ns: u64,
    pub max_switches_per_s: u32,
}

/// A tenant's QoS as compiled from its part of the policy alone (so it is compiled once and
/// kept while the tenant does not change); its name is the tables' business and the scale of
/// its share the policy's. It is kept per tenant of a contract of its own: what is rare is boxed, its meter
/// (most tenants have one) is not, and its classes are shared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct TenantInput {
    /// Its guarantee: its rate, or the sum of its classes' (bytes/s; 0 none).
    pub rate: u64,
    /// Its port `weight` (0: none; its guarantee then gives its share: [`TenantInput::share`]).
    pub weight: u32,
    pub burst: u64,
    pub burst_given: bool,
    pub ceil: u64,
    /// `None`: no meter (a row of kind 0 as given).
    #[cfg_attr(feature = "python", pyo3(from_py_with = meter_row))]
    pub meter: Option<MeterRow>,
    /// `None`: no shaper (a row of rate 0 as given).
    #[cfg_attr(feature = "python", pyo3(from_py_with = shaper_row))]
    pub shaper: Option<Box<ShaperRow>>,
    #[cfg_attr(feature = "python", pyo3(from_py_with = boxed))]
    pub microburst: Option<Box<BurstRow>>,
    #[cfg_attr(feature = "python", pyo3(from_py_with = class_list))]
    pub classes: Arc<[ClassInput]>,
    #[cfg_attr(feature = "python", pyo3(from_py_with = boxed))]
    pub on_burst: Option<Box<ProfileInput>>,
    #[cfg_attr(feature = "python", pyo3(from_py_with = boxed))]
    pub on_overload: Option<Box<ProfileInput>>,
}

/// The egress port as the policy sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct PortInput {
    /// Bytes per second.
    pub rate: u64,
    pub buffer: u64,
    /// 0 per_tenant, 1 shared_fifo.
    pub mode: u8,
    pub alpha_log2: i8,
    /// Bytes of the buffer set aside for the guarantees, in proportion to them.
    pub reserve: u64,
    pub microburst: BurstRow,
    pub overload: Option<OverloadRow>,
}

/// The port's overload setting: thresholds in bytes of its buffer, and the stagger of returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct OverloadRow {
    pub above: u64,
    pub below: u64,
    pub stagger_ns: u64,
}

/// The policy-wide QoS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "python", derive(FromPyObject))]
pub struct QosSettings {
    /// [`Count`] code: which bytes shapers and the port count.
    pub byte_count: u8,
    /// The incoming colour code of each DSCP (64 of them), for colour-aware meters.
    pub color_map: Vec<u8>,
    pub port: Option<PortInput>,
    /// The polled views' intervals (docs/bursts.md).
    pub poll_ns: Vec<u64>,
}

impl Default for QosSettings {
    fn default() -> Self {
        QosSettings { byte_count: Count::Outer as u8, color_map: vec![0; 64], port: None, poll_ns: Vec::new() }
    }
}

impl QosSettings {
    fn color_map(&self) -> Result<[Color; 64], CoreError> {
        let map: [u8; 64] =
            self.color_map.as_slice().try_into().map_err(|_| CoreError::spec_at("color_map", format!("{} entries, not 64", self.color_map.len())))?;
        let mut colors = [Color::Green; 64];
        for (dscp, (color, code)) in colors.iter_mut().zip(map).enumerate() {
            *color = Color::try_from(code).map_err(|e| e.within(format!("color_map[{dscp}]")))?;
        }
        Ok(colors)
    }

    pub(crate) fn overload(&self) -> Option<Overload> {
        let overload = self.port.as_ref()?.overload?;
        Some(Overload { above_bytes: overload.above, below_bytes: overload.below, stagger_ns: overload.stagger_ns })
    }

    pub(crate) fn port(&self) -> Result<Option<PortConfig>, CoreError> {
        let Some(port) = &self.port else { return Ok(None) };
        let mode = PortMode::try_from(port.mode)?;
        Ok(Some(PortConfig { line_rate: port.rate, buffer_bytes: port.buffer, mode }))
    }
}

impl MeterRow {
    fn spec(&self) -> Result<Option<MeterSpec>, CoreError> {
        let (cir, cbs, eir, ebs, pir, pbs) = (self.cir, self.cbs, self.eir, self.ebs, self.pir, self.pbs);
        let kind = match MeterKindCode::try_from(self.kind)? {
            MeterKindCode::None => return Ok(None),
            MeterKindCode::Srtcm => MeterKind::SrTcm { cir, cbs, ebs },
            MeterKindCode::Trtcm => MeterKind::TrTcm { pir, pbs, cir, cbs },
            MeterKindCode::Rfc4115 => MeterKind::Rfc4115 { cir, cbs, eir, ebs },
        };
        let mut actions = [ColorAction::Pass; 3];
        for (color, action) in actions.iter_mut().enumerate() {
            *action = match ColorActionCode::try_from(self.actions[color]).map_err(|e| e.within(format!("colour {color}")))? {
                ColorActionCode::Pass => ColorAction::Pass,
                ColorActionCode::Remark => ColorAction::Remark(self.remark_dscp[color]),
                ColorActionCode::Drop => ColorAction::Drop,
            };
        }
        let count = Count::try_from(self.byte_count).map_err(|e| e.within("meter count"))?;
        Ok(Some(MeterSpec { params: MeterParams { kind, color_aware: self.color_aware }, count, actions }))
    }
}

impl ShaperRow {
    fn spec(&self) -> Option<ShaperParams> {
        (self.rate > 0).then_some(ShaperParams { rate: self.rate, burst: self.burst, max_queue_bytes: self.queue, max_delay_ns: self.max_delay_ns })
    }
}

impl BurstRow {
    pub(crate) fn config(&self) -> BurstConfig {
        let queue = self.queue.map(|(rise_bytes, fall_bytes)| QueueThresholds { rise_bytes, fall_bytes });
        BurstConfig { window_ns: self.window_ns, threshold_bps: self.threshold_bps, queue }
    }
}

fn contract(meter: Option<&MeterRow>, shaper: Option<&ShaperRow>) -> Result<Contract, CoreError> {
    Ok(Contract { meter: meter.map(MeterRow::spec).transpose()?.flatten(), shaper: shaper.and_then(ShaperRow::spec) })
}

impl TenantInput {
    /// The contracts and port queues of the tenant `name` (the inputs an engine keeps have no
    /// name: [`InputPool`]).
    pub fn resolve(&self, name: &Arc<str>, port: Option<&PortInput>) -> Result<TenantQos, CoreError> {
        let place = |class: Option<usize>| match class {
            Some(c) => format!("tenant '{name}', class {c}"),
            None => format!("tenant '{name}'"),
        };
        let queues = self.port_queues(None, port).map_err(|e| e.within(place(None)))?;
        // Pushed into a vector of the exact size: collected through a `Result`, it would hold room for four.
        let mut classes = Vec::with_capacity(self.classes.len());
        for (c, (class, queue)) in self.classes.iter().zip(&queues).enumerate() {
            let contract = contract(class.meter.as_deref(), class.shaper.as_deref()).map_err(|e| e.within(place(Some(c))))?;
            let on_burst = class
                .on_burst
                .as_ref()
                .map(|p| class_profile(p, contract, *queue).map(Box::new))
                .transpose()
                .map_err(|e| e.within(format!("{}, on_burst", place(Some(c)))))?;
            classes.push(ClassQos { contract, queue: *queue, on_burst });
        }
        let contract = contract(self.meter.as_ref(), self.shaper.as_deref()).map_err(|e| e.within(place(None)))?;
        let normal = ProfileQos { contract, queues };
        let profile = |p: &ProfileInput, name: &str| self.profile(p, &normal, port).map_err(|e| e.within(format!("{}, {name}", place(None))));
        let on_burst = self.on_burst.as_ref().map(|p| {
            Ok::<_, CoreError>(Box::new(BurstProfile { profile: profile(p, "on_burst")?, hold_ns: p.hold_ns, max_switches_per_s: p.max_switches_per_s }))
        });
        let on_overload = self.on_overload.as_ref().map(|p| profile(p, "on_overload").map(Box::new));
        Ok(TenantQos { name: Arc::clone(name), contract, classes, on_burst: on_burst.transpose()?, on_overload: on_overload.transpose()? })
    }

    /// Its share of the port's spare capacity, before the port's [`WeightScale`] makes it
    /// units: its `weight`, else its guarantee in bytes/s (0: one unit).
    pub fn share(&self) -> u64 {
        if self.weight > 0 {
            u64::from(self.weight)
        } else {
            self.rate
        }
    }

    /// `given` applied to the tenant's `normal` contract and queues.
    fn profile(&self, given: &ProfileInput, normal: &ProfileQos, port: Option<&PortInput>) -> Result<ProfileQos, CoreError> {
        let meter = match &given.meter {
            Some(meter) => meter.spec()?,
            None => normal.contract.meter,
        };
        let shaper = given.shaper.as_ref().map_or(normal.contract.shaper, ShaperRow::spec);
        let mut queues = match given.weight {
            Some(weight) => self.port_queues(Some(weight), port)?,
            None => normal.queues.clone(),
        };
        for queue in &mut queues {
            queue.priority = given.priority.unwrap_or(queue.priority);
            if given.no_borrowing {
                if queue.guarantee == 0 {
                    return Err(CoreError::spec("no borrowing needs a guarantee for every class: a class without one would get nothing"));
                }
                queue.ceil = queue.guarantee;
            }
        }
        Ok(ProfileQos { contract: Contract { meter, shaper }, queues })
    }

    /// One port queue per class: the class's priority; weight = class weight, of the tenant's
    /// share (`weight`: a profile's tenant weight, in units, as the share's class weight factor);
    /// guarantee = the class's rate plus its share, by class weight, of the tenant guarantee
    /// its classes do not claim (the first class takes the rounding), capped at its ceiling;
    /// burst = the class's own, else the part of the tenant's burst its guarantee is of the
    /// tenant's (at least 1 B), else 0 (the port's default); reserve = the port's reserve x
    /// guarantee / line rate.
    fn port_queues(&self, weight: Option<u32>, port: Option<&PortInput>) -> Result<Vec<QueueConfig>, CoreError> {
        let weights: u64 = self.classes.iter().map(|c| u64::from(c.weight)).sum();
        let claimed: u64 = self.classes.iter().map(|c| c.rate).sum();
        let spare = self
            .rate
            .checked_sub(claimed)
            .ok_or_else(|| CoreError::spec(format!("its classes' rates add up to {claimed} B/s, more than its rate {} B/s", self.rate)))?;
        let mut shares: Vec<u64> = self.classes.iter().map(|c| share(spare, c.weight, weights)).collect();
        let rounding = spare - shares.iter().sum::<u64>();
        if let Some(first) = shares.first_mut() {
            *first += rounding;
        }
        self.classes
            .iter()
            .zip(shares)
            .enumerate()
            .map(|(c, (class, share))| {
                let rate = class.rate + share;
                let guarantee = if class.ceil > 0 { rate.min(class.ceil) } else { rate };
                let (share, weight) = match weight {
                    None => (self.share(), class.weight),
                    Some(weight) => (0, tenant_times_class(weight, class.weight).map_err(|e| e.within(format!("class {c}")))?),
                };
                let reserved_bytes = port.filter(|p| p.rate > 0).map_or(0, |p| scale(p.reserve, guarantee, p.rate));
                Ok(QueueConfig {
                    priority: class.priority,
                    weight,
                    share,
                    guarantee,
                    burst_bytes: self.queue_burst(class, guarantee),
                    ceil: class.ceil,
                    limit_bytes: 0,
                    reserved_bytes,
                    alpha_log2: Some(port.map_or(0, |p| p.alpha_log2)),
                })
            })
            .collect()
    }

    fn queue_burst(&self, class: &ClassInput, guarantee: u64) -> u64 {
        if class.burst_given {
            class.burst
        } else if self.burst_given && self.rate > 0 && guarantee > 0 {
            scale(self.burst, guarantee, self.rate).max(1)
        } else {
            0
        }
    }

    /// Whether the tenant or a class of it has a microburst setting.
    pub fn watches_any(&self) -> bool {
        self.microburst.is_some() || self.classes.iter().any(|class| class.microburst.is_some())
    }

    /// The microburst settings of the tenant `name` and its classes'.
    pub fn bursts(&self, name: &str) -> TenantBursts {
        let classes = self.classes.iter().enumerate().filter_map(|(c, class)| Some((c as u16, class.microburst.as_ref()?.config()))).collect();
        TenantBursts { name: name.to_string(), tenant: self.microburst.as_ref().map(|b| b.config()), classes }
    }
}

/// A profile's tenant weight (units, beside the others' shares' units) times a class's weight:
/// the class queue's weight, within 32 bits.
fn tenant_times_class(tenant: u32, class: u32) -> Result<u32, CoreError> {
    tenant.checked_mul(class).ok_or_else(|| CoreError::spec(format!("its port weight (tenant weight {tenant} x class weight {class}) is over {}", u32::MAX)))
}

/// A class's burst profile from what the policy gives: its contract with the meter and shaper
/// given in place of the class's, its queue with the priority and class weight given (of the
/// tenant's share, as the class's own).
fn class_profile(given: &ProfileInput, normal: Contract, queue: QueueConfig) -> Result<ClassBurstProfile, CoreError> {
    let meter = match &given.meter {
        Some(meter) => meter.spec()?,
        None => normal.meter,
    };
    let shaper = given.shaper.as_ref().map_or(normal.shaper, ShaperRow::spec);
    let weight = given.weight.unwrap_or(queue.weight);
    let queue = QueueConfig { priority: given.priority.unwrap_or(queue.priority), weight, ..queue };
    Ok(ClassBurstProfile { contract: Contract { meter, shaper }, queue, hold_ns: given.hold_ns, max_switches_per_s: given.max_switches_per_s })
}

/// `spare x weight / weights`, rounded down.
fn share(spare: u64, weight: u32, weights: u64) -> u64 {
    if weights == 0 {
        return 0;
    }
    (u128::from(spare) * u128::from(weight) / u128::from(weights)) as u64
}

/// `value x part / whole` in 128 bits (`part` <= `whole`, so it fits).
fn scale(value: u64, part: u64, whole: u64) -> u64 {
    (u128::from(value) * u128::from(part) / u128::from(whole)) as u64
}

/// The QoS inputs an engine holds, by tenant position, and the spec they resolve to.
#[derive(Debug, Clone, Default)]
pub struct QosInputs {
    pub settings: QosSettings,
    pub tenants: GroupedVec<Arc<TenantInput>>,
    /// How the tenants' shares become units of weight at the port.
    pub weight_scale: WeightScale,
}

impl QosInputs {
    /// The spec of these inputs, checked ([`QosSpec::check`]), tenant `at` being named `name(at)`.
    pub fn spec<'a>(&self, name: impl Fn(usize) -> &'a Arc<str>) -> Result<QosSpec, CoreError> {
        let port = self.settings.port.as_ref();
        let mut tenants = Vec::with_capacity(self.tenants.len()); // exact: collected through a `Result`, it would grow by doubling
        for (at, tenant) in self.tenants.iter().enumerate() {
            tenants.push(tenant.resolve(name(at), port)?);
        }
        let bursts = BurstSpec {
            port: port.map(|p| p.microburst.config()),
            tenants: self.tenants.iter().enumerate().filter(|(_, t)| t.watches_any()).map(|(at, t)| t.bursts(name(at))).collect(),
            poll_ns: self.settings.poll_ns.clone(),
        };
        let count = Count::try_from(self.settings.byte_count).map_err(|e| e.within("count"))?;
        let spec = QosSpec {
            count,
            color_map: self.settings.color_map()?,
            port: self.settings.port()?,
            weight_scale: self.weight_scale,
            tenants,
            bursts,
            overload: self.settings.overload(),
        };
        spec.check()?;
        Ok(spec)
    }
}

/// The QoS inputs an engine keeps, once for all the tenants that give equal ones (a policy
/// sells a few tiers to many tenants), shared by content, so that a simple tenant costs a
/// pointer here instead of its inputs.
#[derive(Debug, Default)]
pub struct InputPool {
    inputs: Shared<TenantInput>,
    classes: Shared<[ClassInput]>,
}

impl InputPool {
    /// The one kept equal to `input` if there is one, else a copy of it, kept from now on (its
    /// classes shared with those of any kept input, as tenants of distinct contracts often have
    /// equal classes).
    pub fn share(&mut self, input: &TenantInput) -> Arc<TenantInput> {
        if let Some(kept) = self.inputs.get(input) {
            return Arc::clone(kept);
        }
        let classes = self.classes.share(Arc::clone(&input.classes));
        self.inputs.share(Arc::new(TenantInput { classes, ..input.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(rate: u64, weight: u32) -> ClassInput {
        ClassInput { priority: 7, weight, rate, ..ClassInput::default() }
    }

    fn tenant(rate: u64, classes: Vec<ClassInput>) -> TenantInput {
        TenantInput { rate, classes: classes.into(), ..TenantInput::default() }
    }

    #[test]
    fn the_guarantee_its_classes_leave_is_shared_by_class_weight_the_first_taking_the_rounding() {
        let queues = tenant(1000, vec![class(100, 1), class(0, 2), class(0, 4)]).port_queues(None, None).unwrap();
        let guarantees: Vec<u64> = queues.iter().map(|q| q.guarantee).collect();
        assert_eq!(guarantees, vec![100 + 128 + 1, 257, 514]); // 900 spare: 128, 257, 514 (+1)
        assert_eq!(queues.iter().map(|q| (q.share, q.weight)).collect::<Vec<_>>(), vec![(1000, 1), (1000, 2), (1000, 4)]);
    }

    #[test]
    fn a_tenant_shares_by_its_weight_else_its_guarantee_and_a_profile_weight_is_units() {
        let weighed = TenantInput { weight: 3, ..tenant(1000, vec![class(0, 2)]) };
        assert_eq!(weighed.port_queues(None, None).unwrap()[0].share, 3);
        assert_eq!(tenant(0, vec![class(0, 2)]).port_queues(None, None).unwrap()[0].share, 0, "no guarantee: one unit");
        let profiled = weighed.port_queues(Some(5), None).unwrap()[0];
        assert_eq!((profiled.share, profiled.weight), (0, 10), "5 units x class weight 2");
    }

    #[test]
    fn a_queue_burst_is_its_class_burst_else_its_share_of_the_tenant_burst() {
        let mut t = tenant(1000, vec![class(0, 1), ClassInput { burst: 77, burst_given: true, ..class(0, 3) }]);
        assert_eq!(t.port_queues(None, None).unwrap().iter().map(|q| q.burst_bytes).collect::<Vec<_>>(), vec![0, 77]);
        (t.burst, t.burst_given) = (4000, true);
        assert_eq!(t.port_queues(None, None).unwrap().iter().map(|q| q.burst_bytes).collect::<Vec<_>>(), vec![1000, 77]);
    }

    #[test]
    fn reserves_follow_the_guarantees_and_ceilings_cap_them() {
        let port = PortInput { rate: 10_000, buffer: 1 << 20, reserve: 5000, ..PortInput::default() };
        let queues = tenant(2000, vec![ClassInput { ceil: 500, ..class(0, 1) }, class(0, 1)]).port_queues(None, Some(&port)).unwrap();
        assert_eq!(queues.iter().map(|q| (q.guarantee, q.reserved_bytes)).collect::<Vec<_>>(), vec![(500, 250), (1000, 500)]);
    }

    #[test]
    fn the_pool_shares_equal_inputs_and_lets_go_of_those_no_tenant_holds() {
        let mut pool = InputPool::default();
        let (a, b) = (pool.share(&tenant(0, vec![class(0, 1)])), pool.share(&tenant(0, vec![class(0, 1)])));
        assert!(Arc::ptr_eq(&a, &b));
        let own = pool.share(&tenant(5, vec![class(0, 1)]));
        assert!(!Arc::ptr_eq(&a, &own) && Arc::ptr_eq(&a.classes, &own.classes), "a contract of its own, its classes shared");
        for rate in 1..=1000 {
            pool.share(&TenantInput { rate, ..tenant(0, vec![]) }); // held by no tenant
        }
        assert!(pool.inputs.len() <= 129 && pool.inputs.contains(&a), "{}", pool.inputs.len());
    }

    #[test]
    fn refusals_name_the_tenant_and_class() {
        let bad_meter = TenantInput {
            classes: [ClassInput { meter: Some(Box::new(MeterRow { kind: 9, ..MeterRow::default() })), ..class(0, 1) }].into(),
            ..tenant(0, vec![])
        };
        let err = bad_meter.resolve(&"a".into(), None).unwrap_err().to_string();
        assert!(err.contains("tenant 'a', class 0") && err.contains("meter kind 9"), "{err}");
        let profile = Some(Box::new(ProfileInput { weight: Some(2), ..ProfileInput::default() }));
        let heavy = TenantInput { on_overload: profile, ..tenant(0, vec![class(0, u32::MAX)]) }.resolve(&"a".into(), None).unwrap_err().to_string();
        assert!(heavy.contains("tenant 'a', on_overload") && heavy.contains("class 0") && heavy.contains("port weight"), "{heavy}");
        let srtcm = MeterRow { kind: 1, byte_count: 1, actions: [0, 0, 2], ..MeterRow::default() };
        let inputs = QosInputs { tenants: vec![Arc::new(TenantInput { meter: Some(srtcm), ..tenant(0, vec![class(0, 1)]) })].into(), ..QosInputs::default() };
        let a: Arc<str> = "a".into();
        assert!(inputs.spec(|_| &a).unwrap_err().to_string().contains("srTCM CIR is 0"));
    }
}
