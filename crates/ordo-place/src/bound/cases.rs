//! The three cases of a segment (see [`super::segments`]) and the memory runs over a chain of
//! segments.

/// What a segment from `a` to `b` costs in each case, and what its nodes keep resident.
#[derive(Clone, Debug)]
pub(super) struct Segment {
    /// Total compute of the inner nodes.
    pub(super) work: u64,
    /// Resident bytes of the inner nodes.
    pub(super) inner_bytes: u64,
    /// Resident bytes of `a` and `b`.
    pub(super) end_bytes: u64,
    /// Compute of the critical path's inner nodes: the longest inner path.
    pub(super) stretch: u64,
    /// The least gap when `a` and `b` are on different devices as far as paths tell: every path
    /// from `a` to `b` crosses, so its compute plus its cheapest edge's transfer (`u64::MAX`
    /// when `a` and `b` must share a device).
    pub(super) crossing: u64,
    /// The cheapest transfer of any edge among `a`, the inner nodes and `b` that may cross.
    pub(super) transfer: u64,
    /// With transfers queueing at a device's channel: the least gap when `a` and `b` are on
    /// different devices, the cheapest set of tensors cutting every path
    /// ([`super::tensor_cut`]); 0 where not counted.
    pub(super) first_sends: u64,
    /// With transfers queueing at a device's channel: `(gap, bytes on a's device, bytes on
    /// b's device)` of the ways to split the segment ([`super::sides`]); empty where not
    /// counted (a split then keeps nothing on either side).
    pub(super) split_menu: Vec<(u64, u64, u64)>,
    /// `(least path cost when it is away, compute, resident bytes, node)` of each inner node
    /// that may leave the devices of `a` and `b`, in increasing order; the path cost is the longest path
    /// from `a` through the node to `b` plus the cheapest transfer on a path into it and the
    /// cheapest on a path out of it (it crosses devices before and after the node).
    pub(super) movable: Vec<(u64, u64, u64, usize)>,
}

/// The least gap of a segment in each case, with no memory limit.
#[derive(Clone, Copy, Debug)]
pub(super) struct CaseGaps {
    /// Case 1: everything on one device.
    pub(super) one_device: u64,
    /// Case 2: `a` and `b` together, some inner nodes elsewhere.
    pub(super) some_away: u64,
    /// Case 3: `a` and `b` on different devices.
    pub(super) split: u64,
}

impl Segment {
    /// The smallest gap over the three cases of [`super::segments`] on `devices` devices of
    /// at most `cap` bytes.
    ///
    /// Moving every movable node whose path cost is at most `L` is the best set for that `L`:
    /// it takes the most work and memory off the ends' devices at the same path cost. Case
    /// 3 (different devices for `a` and `b`) also splits the rest between them: the nodes on
    /// `b`'s device wait for a transfer before they run, and those on `a`'s device send to `b`
    /// after they ran, so the gap is at least a transfer plus half the rest.
    pub(super) fn least_gap(&self, devices: usize, cap: u64) -> u64 {
        let gaps = self.gaps(devices, cap);
        let best = gaps.one_device.min(gaps.some_away).min(gaps.split);
        // No case possible means no placement fits; the critical path's stretch stays a bound.
        if best == u64::MAX { self.stretch } else { best.max(self.stretch) }
    }

    /// The least gap in each case on `devices` devices of at most `cap` bytes (`u64::MAX`
    /// where a case is impossible).
    pub(super) fn gaps(&self, devices: usize, cap: u64) -> CaseGaps {
        let t = self.transfer;
        let bytes = self.inner_bytes.saturating_add(self.end_bytes);
        let split = |moved: u64, freed: u64, away: Option<u64>| {
            let fits = bytes - freed <= cap.saturating_mul(2);
            let allowed = devices >= 2 && (away.is_none() || devices >= 3) && fits;
            if !allowed || self.crossing == u64::MAX {
                return u64::MAX;
            }
            let half = (self.work - moved).div_ceil(2).saturating_add(t);
            let away = away.unwrap_or(0);
            self.crossing.max(half).max(away).max(self.first_sends)
        };
        let mut gaps = CaseGaps {
            one_device: if bytes <= cap { self.work } else { u64::MAX },
            some_away: u64::MAX,
            split: split(0, 0, None),
        };
        for (away, moved, freed) in self.prefixes() {
            if devices >= 2 && away != u64::MAX && bytes - freed <= cap {
                gaps.some_away = gaps.some_away.min((self.work - moved).max(away));
            }
            gaps.split = gaps.split.min(split(moved, freed, Some(away)));
        }
        gaps
    }

    /// For each path cost `L` among the movable nodes, in increasing order: `(L, compute,
    /// resident bytes)` of all movable nodes of path cost at most `L` (the sets the cases
    /// weigh).
    fn prefixes(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let mut sums = (0u64, 0u64);
        self.movable.iter().enumerate().filter_map(move |(k, &(away, weight, bytes, _))| {
            sums = (sums.0 + weight, sums.1.saturating_add(bytes));
            let last_of_its_cost = self.movable.get(k + 1).is_none_or(|n| n.0 != away);
            last_of_its_cost.then_some((away, sums.0, sums.1))
        })
    }

    /// The ways to keep `a` and `b` on one device without a memory limit, as `(least gap,
    /// fewest resident bytes of inner nodes left on that device)`: everything there (case 1),
    /// or the movable nodes of path cost up to each `L` away (case 2). At most [`MENU`]
    /// entries: where there are more, neighbours are merged into one entry with the smaller
    /// gap and the fewer bytes of the two, which no placement can beat, so the menu stays a
    /// relaxation.
    fn together_menu(&self, devices: usize) -> Vec<(u64, u64)> {
        let mut menu = vec![(self.work, self.inner_bytes)];
        if devices >= 2 {
            let away = self.prefixes().filter(|p| p.0 != u64::MAX);
            menu.extend(away.map(|(away, moved, freed)| {
                ((self.work - moved).max(away), self.inner_bytes.saturating_sub(freed))
            }));
        }
        // Keep the entries no other beats in both gap and bytes, by increasing gap.
        menu.sort_unstable();
        let mut front: Vec<(u64, u64)> = Vec::new();
        for (gap, bytes) in menu {
            if front.last().is_none_or(|&(_, fewest)| bytes < fewest) {
                front.push((gap, bytes));
            }
        }
        let per = front.len().div_ceil(MENU);
        front
            .chunks(per.max(1))
            .map(|c| (c[0].0, c.iter().map(|e| e.1).min().unwrap_or(0)))
            .collect()
    }
}

/// The most ways per segment [`memory_runs`] weighs.
const MENU: usize = 16;

/// The longest chain [`memory_runs`] looks at.
const MAX_CHAIN: usize = 4096;
/// The DP's states over the whole chain: a device holds `STATES / chain length` units, between
/// [`MIN_UNITS`] and [`MAX_UNITS`].
const STATES: usize = 1 << 20;
/// The fewest units a device holds in [`memory_runs`].
const MIN_UNITS: usize = 256;
/// The most units a device holds in [`memory_runs`].
const MAX_UNITS: usize = 4096;

/// A lower bound on the sum of the gaps of a chain of `segments` (segment `k` from chain node
/// `k` to chain node `k + 1`, whose resident bytes and bytes allocated at its start are
/// `node_bytes`) on `devices` devices of at most `cap` bytes each.
///
/// Chain nodes joined by segments whose ends share a device form a *run* on one device, which
/// must hold the run's chain nodes and what its segments keep there: all inner nodes in case 1,
/// those that do not move in case 2 (each segment weighs its menu of gaps against bytes kept,
/// [`Segment::together_menu`]). A run over `cap` is impossible, so some segment inside it
/// must pay case 2 or split its ends and pay case 3; with a split menu
/// ([`Segment::split_menu`]), a split adds what `a`'s side keeps to the run it ends and starts
/// the next with what `b`'s side keeps. Dynamic programming over the chain and the
/// bytes of the current run, counted in whole units of `cap / 256` to `cap / 4096` (finer for shorter chains) rounded
/// down, so that every
/// placement's choice of cases stays possible and the result stays a bound. When a chain node
/// starts, everything its run kept so far has started (its inner nodes and earlier chain nodes
/// are its ancestors), so the run so far and what the node allocates at its start must fit.
pub(super) fn memory_runs(
    segments: &[Segment],
    node_bytes: &[(u64, u64)],
    devices: usize,
    cap: u64,
) -> u64 {
    debug_assert_eq!(node_bytes.len(), segments.len() + 1);
    let inner = segments.iter().map(|s| s.inner_bytes);
    let resident = node_bytes.iter().map(|b| b.0);
    let total = resident.chain(inner).fold(0u64, u64::saturating_add);
    // Everything fits one device (no run is ever cut), or the chain is too long: the chain's
    // own bound stands.
    if total <= cap || node_bytes.len() > MAX_CHAIN {
        return 0;
    }
    let units_per_device = (STATES / node_bytes.len()).clamp(MIN_UNITS, MAX_UNITS) as u64;
    let unit = (cap / units_per_device).max(1);
    let limit = (cap / unit) as usize;
    let units = |bytes: u64| usize::try_from(bytes / unit).unwrap_or(usize::MAX);
    // cost[u]: the least sum of gaps so far with `u` units in the current run.
    let mut cost = vec![u64::MAX; limit + 1];
    let first = units(node_bytes[0].0);
    let Some(slot) =
        cost.get_mut(first).filter(|_| first.saturating_add(units(node_bytes[0].1)) <= limit)
    else {
        return 0;
    };
    *slot = 0;
    for (segment, &(next_bytes, next_start)) in segments.iter().zip(&node_bytes[1..]) {
        let gaps = segment.gaps(devices, u64::MAX);
        let menu: Vec<(u64, usize)> =
            segment.together_menu(devices).into_iter().map(|(gap, b)| (gap, units(b))).collect();
        let (next, room) = (units(next_bytes), limit.saturating_sub(units(next_start)));
        let splits: Vec<(u64, usize, usize)> = if gaps.split == u64::MAX {
            Vec::new()
        } else if segment.split_menu.is_empty() {
            vec![(gaps.split, 0, 0)]
        } else {
            let entry = |&(gap, a, b): &(u64, u64, u64)| (gap.max(gaps.split), units(a), units(b));
            segment.split_menu.iter().map(entry).collect()
        };
        let mut after = vec![u64::MAX; limit + 1];
        let mut offer = |u: usize, value: u64| {
            if let Some(slot) = after.get_mut(u).filter(|_| u <= room) {
                *slot = (*slot).min(value);
            }
        };
        for (u, &so_far) in cost.iter().enumerate().filter(|c| *c.1 != u64::MAX) {
            for &(gap, bytes) in &menu {
                offer(u.saturating_add(bytes).saturating_add(next), so_far.saturating_add(gap));
            }
            // A split adds what `a`'s side keeps to this run, and starts the next with `b`
            // and what `b`'s side keeps.
            for &(gap, on_a, on_b) in &splits {
                if u.saturating_add(on_a) <= limit {
                    offer(next.saturating_add(on_b), so_far.saturating_add(gap));
                }
            }
        }
        cost = after;
    }
    cost.into_iter().min().filter(|&c| c != u64::MAX).unwrap_or(0)
}
