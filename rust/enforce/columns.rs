//! A [`QosSpec`] from the integer arrays of Python's `CompiledQos` (docs/qos.md, "Compiled
//! layout"), one row per tenant or class, with errors that name the row.

use super::{ClassQos, ColorAction, ColorActionCode, Contract, Count, MeterSpec, QosSpec, TenantQos};
use crate::bursts::{BurstConfig, BurstSpec, QueueThresholds, Scope, TenantBursts};
use crate::meter::{Color, MeterKind, MeterKindCode, MeterParams};
use crate::shaping::{PortConfig, PortMode, QueueConfig, ShaperParams};

/// `MeterArrays`: one meter per row; `action` and `remark_dscp` hold 3 entries a row (green,
/// yellow, red).
#[derive(Debug, Clone, Default)]
pub struct MeterColumns {
    pub kind: Vec<u8>,
    pub color_aware: Vec<u8>,
    pub count: Vec<u8>,
    pub cir: Vec<u64>,
    pub cbs: Vec<u64>,
    pub eir: Vec<u64>,
    pub ebs: Vec<u64>,
    pub pir: Vec<u64>,
    pub pbs: Vec<u64>,
    pub action: Vec<u8>,
    pub remark_dscp: Vec<u8>,
}

/// `ShaperArrays`: rate 0 = no shaper.
#[derive(Debug, Clone, Default)]
pub struct ShaperColumns {
    pub rate: Vec<u64>,
    pub burst: Vec<u64>,
    pub queue: Vec<u64>,
    pub max_delay_ns: Vec<u64>,
}

/// `BurstArrays`: one row per scope watched for microbursts (docs/bursts.md), and the
/// polling intervals.
#[derive(Debug, Clone, Default)]
pub struct BurstColumns {
    /// `bursts::Scope`: 0 the port, 1 a tenant, 2 a class.
    pub scope: Vec<u8>,
    /// Index into `tenant_names` (the port's row: -1).
    pub tenant: Vec<i64>,
    /// A class scope's class id (else -1).
    pub cls: Vec<i64>,
    pub window_ns: Vec<u64>,
    pub threshold_bps: Vec<u64>,
    /// 1 where the scope has a queue view, with its rise and fall thresholds.
    pub has_queue: Vec<u8>,
    pub queue_rise: Vec<u64>,
    pub queue_fall: Vec<u64>,
    pub poll_ns: Vec<u64>,
}

impl BurstColumns {
    fn spec(&self, tenant_names: &[String]) -> Result<BurstSpec, String> {
        let rows = self.scope.len();
        let lengths = [
            self.tenant.len(),
            self.cls.len(),
            self.window_ns.len(),
            self.threshold_bps.len(),
            self.has_queue.len(),
            self.queue_rise.len(),
            self.queue_fall.len(),
        ];
        if lengths.iter().any(|&len| len != rows) {
            return Err(format!("burst columns have {rows} scopes but lengths {lengths:?}"));
        }
        let mut spec = BurstSpec {
            poll_ns: self.poll_ns.clone(),
            tenants: tenant_names.iter().map(|name| TenantBursts { name: name.clone(), ..TenantBursts::default() }).collect(),
            port: None,
        };
        for row in 0..rows {
            let queue = (self.has_queue[row] != 0).then(|| QueueThresholds { rise_bytes: self.queue_rise[row], fall_bytes: self.queue_fall[row] });
            let config = BurstConfig { window_ns: self.window_ns[row], threshold_bps: self.threshold_bps[row], queue };
            let tenant = usize::try_from(self.tenant[row]).ok().and_then(|t| spec.tenants.get_mut(t));
            match (self.scope[row], tenant) {
                (s, _) if s == Scope::Port as u8 => spec.port = Some(config),
                (s, Some(tenant)) if s == Scope::Tenant as u8 => tenant.tenant = Some(config),
                (s, Some(tenant)) if s == Scope::Class as u8 => {
                    let cls = u16::try_from(self.cls[row]).map_err(|_| format!("burst row {row}: class {} is out of range", self.cls[row]))?;
                    tenant.classes.push((cls, config));
                }
                (scope, _) => {
                    return Err(format!(
                        "burst row {row}: scope {scope} of tenant {} is not a port (0), tenant (1) or class (2) of a known tenant",
                        self.tenant[row]
                    ))
                }
            }
        }
        spec.tenants.retain(|t| t.tenant.is_some() || !t.classes.is_empty());
        Ok(spec)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ContractColumns {
    pub meter: MeterColumns,
    pub shaper: ShaperColumns,
}

/// Everything [`QosSpec`] needs. The port queues are one per class row (their flattening from
/// tenant and class settings is the caller's: `isolane.engine` documents it).
#[derive(Debug, Clone, Default)]
pub struct QosColumns {
    pub tenant_names: Vec<String>,
    pub count: u8,
    pub color_map: Vec<u8>,
    pub port_rate: u64,
    pub port_buffer: u64,
    pub port_mode: u8,
    /// The dynamic threshold of every queue: alpha = 2^port_alpha_log2.
    pub port_alpha_log2: i8,
    pub tenant: ContractColumns,
    pub class: ContractColumns,
    pub class_offsets: Vec<i64>,
    pub bursts: BurstColumns,
    pub queue_priority: Vec<u8>,
    pub queue_weight: Vec<u32>,
    pub queue_guarantee: Vec<u64>,
    pub queue_ceil: Vec<u64>,
    /// The guarantee bucket's depth; 0 = the port's default.
    pub queue_burst: Vec<u64>,
    pub queue_reserved: Vec<u64>,
}

impl QosColumns {
    /// The spec, checked ([`QosSpec::check`]).
    pub fn into_spec(self) -> Result<QosSpec, String> {
        let tenants = self.tenant_names.len();
        if self.class_offsets.len() != tenants + 1 || self.class_offsets.first() != Some(&0) || self.class_offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("class_offsets must rise from 0 with one entry per tenant and one more ({tenants} tenants)"));
        }
        let classes = *self.class_offsets.last().unwrap_or(&0) as usize;
        self.tenant.check_lengths("tenant", tenants)?;
        self.class.check_lengths("class", classes)?;
        for (name, len) in [
            ("queue_priority", self.queue_priority.len()),
            ("queue_weight", self.queue_weight.len()),
            ("queue_guarantee", self.queue_guarantee.len()),
            ("queue_ceil", self.queue_ceil.len()),
            ("queue_burst", self.queue_burst.len()),
            ("queue_reserved", self.queue_reserved.len()),
        ] {
            if len != classes {
                return Err(format!("{name} has {len} rows for {classes} classes"));
            }
        }
        let spec = QosSpec {
            count: Count::try_from(self.count).map_err(|why| format!("count: {why}"))?,
            color_map: self.color_map()?,
            port: self.port()?,
            tenants: (0..tenants).map(|t| self.tenant_qos(t)).collect::<Result<_, _>>()?,
            bursts: self.bursts.spec(&self.tenant_names)?,
        };
        spec.check()?;
        Ok(spec)
    }

    fn color_map(&self) -> Result<[Color; 64], String> {
        if self.color_map.len() != 64 {
            return Err(format!("color_map has {} entries, not one per DSCP (64)", self.color_map.len()));
        }
        let mut map = [Color::Green; 64];
        for (dscp, (slot, &code)) in map.iter_mut().zip(&self.color_map).enumerate() {
            *slot = Color::try_from(code).map_err(|why| format!("color_map[{dscp}]: {why}"))?;
        }
        Ok(map)
    }

    fn port(&self) -> Result<Option<PortConfig>, String> {
        if self.port_rate == 0 {
            return Ok(None);
        }
        let mode = PortMode::try_from(self.port_mode)?;
        Ok(Some(PortConfig { line_rate: self.port_rate, buffer_bytes: self.port_buffer, mode }))
    }

    fn tenant_qos(&self, tenant: usize) -> Result<TenantQos, String> {
        let name = &self.tenant_names[tenant];
        let place = |what: &str| format!("tenant {tenant} ('{name}'){what}");
        let rows = self.class_offsets[tenant] as usize..self.class_offsets[tenant + 1] as usize;
        let classes = rows
            .map(|row| {
                let queue = QueueConfig {
                    priority: self.queue_priority[row],
                    weight: self.queue_weight[row],
                    guarantee: self.queue_guarantee[row],
                    burst_bytes: self.queue_burst[row],
                    ceil: self.queue_ceil[row],
                    limit_bytes: 0,
                    reserved_bytes: self.queue_reserved[row],
                    alpha_log2: Some(self.port_alpha_log2),
                };
                let at = place(&format!(", class {}", row - self.class_offsets[tenant] as usize));
                Ok(ClassQos { contract: self.class.contract(row).map_err(|why| format!("{at}: {why}"))?, queue })
            })
            .collect::<Result<_, String>>()?;
        let contract = self.tenant.contract(tenant).map_err(|why| format!("{}: {why}", place("")))?;
        Ok(TenantQos { name: name.clone(), contract, classes })
    }
}

impl ContractColumns {
    fn check_lengths(&self, rows_of: &str, rows: usize) -> Result<(), String> {
        let m = &self.meter;
        let s = &self.shaper;
        let lengths = [
            ("meter kind", m.kind.len(), 1),
            ("meter color_aware", m.color_aware.len(), 1),
            ("meter count", m.count.len(), 1),
            ("meter cir", m.cir.len(), 1),
            ("meter cbs", m.cbs.len(), 1),
            ("meter eir", m.eir.len(), 1),
            ("meter ebs", m.ebs.len(), 1),
            ("meter pir", m.pir.len(), 1),
            ("meter pbs", m.pbs.len(), 1),
            ("meter action", m.action.len(), 3),
            ("meter remark_dscp", m.remark_dscp.len(), 3),
            ("shaper rate", s.rate.len(), 1),
            ("shaper burst", s.burst.len(), 1),
            ("shaper queue", s.queue.len(), 1),
            ("shaper max_delay_ns", s.max_delay_ns.len(), 1),
        ];
        for (name, len, per_row) in lengths {
            if len != rows * per_row {
                return Err(format!("{rows_of} {name} has {len} entries for {rows} rows ({per_row} a row)"));
            }
        }
        Ok(())
    }

    fn contract(&self, row: usize) -> Result<Contract, String> {
        Ok(Contract { meter: self.meter.row(row)?, shaper: self.shaper.row(row) })
    }
}

impl MeterColumns {
    fn row(&self, row: usize) -> Result<Option<MeterSpec>, String> {
        let (cir, cbs, eir, ebs, pir, pbs) = (self.cir[row], self.cbs[row], self.eir[row], self.ebs[row], self.pir[row], self.pbs[row]);
        let kind = match MeterKindCode::try_from(self.kind[row])? {
            MeterKindCode::None => return Ok(None),
            MeterKindCode::Srtcm => MeterKind::SrTcm { cir, cbs, ebs },
            MeterKindCode::Trtcm => MeterKind::TrTcm { pir, pbs, cir, cbs },
            MeterKindCode::Rfc4115 => MeterKind::Rfc4115 { cir, cbs, eir, ebs },
        };
        let mut actions = [ColorAction::Pass; 3];
        for (color, action) in actions.iter_mut().enumerate() {
            *action = match ColorActionCode::try_from(self.action[row * 3 + color]).map_err(|why| format!("{why} (colour {color})"))? {
                ColorActionCode::Pass => ColorAction::Pass,
                ColorActionCode::Remark => ColorAction::Remark(self.remark_dscp[row * 3 + color]),
                ColorActionCode::Drop => ColorAction::Drop,
            };
        }
        Ok(Some(MeterSpec {
            params: MeterParams { kind, color_aware: self.color_aware[row] != 0 },
            count: Count::try_from(self.count[row]).map_err(|why| format!("meter count: {why}"))?,
            actions,
        }))
    }
}

impl ShaperColumns {
    fn row(&self, row: usize) -> Option<ShaperParams> {
        (self.rate[row] > 0).then(|| ShaperParams {
            rate: self.rate[row],
            burst: self.burst[row],
            max_queue_bytes: self.queue[row],
            max_delay_ns: self.max_delay_ns[row],
        })
    }
}
