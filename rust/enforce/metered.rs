//! A packet's way through its meters and shapers: the colour and remark the meters give, the
//! time the shapers let it leave.

use super::*;

/// What the meters did to a packet so far.
pub(super) struct Metered {
    /// The worst colour any meter gave (green if none).
    pub(super) color: Color,
    /// What the next colour-aware meter takes: the packet's DSCP colour, then the colour the
    /// meter before it gave.
    pub(super) incoming: Color,
    /// The DSCP a remark wrote (the last one, if both meters remark).
    pub(super) dscp: Option<u8>,
    pub(super) dropped: bool,
}

impl Metered {
    pub(super) fn new(incoming: Color) -> Self {
        Metered { color: Color::Green, incoming, dscp: None, dropped: false }
    }

    /// One profile's meter, if it has one (the tenant's, then the class's), and its action for
    /// the colour it gives.
    #[inline]
    pub(super) fn meter(&mut self, profile: &Profile, state: &mut MeterState, info: &Arrival, now: u64) {
        let Some(consts) = &profile.meter else { return };
        let color = state.mark_with(consts, now, profile.meter_count.bytes(info), self.incoming);
        self.color = self.color.max(color);
        self.incoming = color;
        match profile.actions[color as usize] {
            ColorAction::Pass => {}
            ColorAction::Remark(dscp) => self.dscp = Some(dscp),
            ColorAction::Drop => self.dropped = true,
        }
    }
}

/// The release time under the tenant's shaper and the class's (the later of the two, as EDT
/// composes), or the first one's reason to drop; a dropped packet changes neither shaper (a
/// shaper that drops changes nothing itself, so only the tenant's waits for the class's).
#[inline]
pub(super) fn shape(now: u64, bytes: u32, tenant: Option<(&ShaperConsts, &mut Stage)>, class: Option<(&ShaperConsts, &mut Stage)>) -> Result<u64, ShapeDrop> {
    match (tenant, class) {
        (None, None) => Ok(now),
        (Some((consts, stage)), None) | (None, Some((consts, stage))) => stage.shaper.shape_with(consts, now, bytes),
        (Some((tenant_consts, tenant)), Some((class_consts, class))) => {
            let mut tenant_state = tenant.shaper;
            let tenant_release = tenant_state.shape_with(tenant_consts, now, bytes)?;
            let class_release = class.shaper.shape_with(class_consts, now, bytes)?;
            tenant.shaper = tenant_state;
            Ok(tenant_release.max(class_release))
        }
    }
}
