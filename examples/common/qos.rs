//! The QoS spec of the enforcement speed examples: every tenant (named `t0`, `t1`, ...) with an
//! srTCM meter at `cir` (red dropped) and an EDT shaper at 1.25x `cir`, and one class without a
//! contract.
use isolane::enforce::{ClassQos, ColorAction, Contract, Count, MeterSpec, QosSpec, TenantQos};
use isolane::meter::{default_burst, MeterKind, MeterParams};
use isolane::shaping::{QueueConfig, ShaperParams};

pub fn metered_and_shaped(tenants: usize, cir: u64) -> QosSpec {
    let meter = MeterSpec {
        params: MeterParams::blind(MeterKind::SrTcm { cir, cbs: default_burst(cir, 1500), ebs: default_burst(cir, 1500) }),
        count: Count::Outer,
        actions: [ColorAction::Pass, ColorAction::Pass, ColorAction::Drop],
    };
    let shaper = ShaperParams { rate: cir * 5 / 4, burst: 1500, max_queue_bytes: 16 << 10, max_delay_ns: 100_000_000 };
    let contract = Contract { meter: Some(meter), shaper: Some(shaper) };
    let class = ClassQos { contract: Contract::default(), queue: QueueConfig::BEST_EFFORT, on_burst: None };
    let tenant = |t: usize| TenantQos { name: format!("t{t}").into(), contract, classes: vec![class.clone()], on_burst: None, on_overload: None };
    QosSpec { tenants: (0..tenants).map(tenant).collect(), ..QosSpec::default() }
}
