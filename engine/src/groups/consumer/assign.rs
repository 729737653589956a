//! The target assignment (server-side `uniform` and `range` assignors) and
//! each member's reconciliation towards it.

use super::*;

impl ConsumerGroup {
    /// The assignor the members prefer (most votes; the default when none
    /// names one).
    fn pick_assignor(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|&(name, n)| (n, std::cmp::Reverse(name)))
            .map_or_else(|| ASSIGNORS[0].to_owned(), |(n, _)| n.to_owned())
    }

    /// Recomputes the target assignment when the group epoch moved, or the
    /// subscribed topics' partitions changed.
    pub fn maybe_assign(&mut self, topics: &TopicsView) {
        let seen: BTreeMap<String, (Uuid, i32)> = self
            .consumed_topics(topics)
            .into_iter()
            .filter_map(|t| topics.get(&t).map(|v| (t, *v)))
            .collect();
        let topics_moved = self.assigned_with.as_ref() != Some(&seen);
        if self.group_epoch == self.assignment_epoch && !topics_moved {
            return;
        }
        if self.group_epoch == self.assignment_epoch
            && self.assigned_with.is_none()
            && self.compute_target(topics) == self.target
        {
            // Just loaded (a takeover), and the stored target still holds:
            // no new epoch for the members.
            self.assigned_with = Some(seen);
            return;
        }
        if self.group_epoch == self.assignment_epoch {
            // Partitions appeared or vanished: that is a new epoch too.
            self.bump();
        }
        self.assignor = self.pick_assignor();
        self.target = self.compute_target(topics);
        self.assignment_epoch = self.group_epoch;
        self.assigned_with = Some(seen);
    }

    fn compute_target(&self, topics: &TopicsView) -> HashMap<String, Partitions> {
        let assignor = self.pick_assignor();
        let subs: Vec<(&str, Vec<(Uuid, i32)>)> = self
            .members
            .values()
            .map(|m| {
                (
                    m.member_id.as_str(),
                    self.member_topics(m, topics)
                        .iter()
                        .filter_map(|t| topics.get(t).copied())
                        .collect(),
                )
            })
            .collect();
        if assignor == "range" {
            range_assign(&subs)
        } else {
            uniform_assign(&subs, &self.target)
        }
    }

    /// Moves a member towards its target: first it revokes what the target
    /// no longer holds; then it takes the assignment epoch and every target
    /// partition no other member still owns.
    pub(super) fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&Partitions>,
        now: Instant,
        changed: &mut bool,
    ) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if !m.revoking.is_empty() {
            match owned {
                Some(o) if !intersects(o, &m.revoking) => {
                    m.revoking.clear();
                    m.revoke_deadline = None;
                    *changed = true;
                }
                _ => return, // still revoking
            }
        }
        if m.epoch != epoch {
            let give_up = minus(&m.assigned, &target);
            if !give_up.is_empty() {
                m.assigned = minus(&m.assigned, &give_up);
                m.revoking = give_up;
                m.revoke_deadline = Some(now + m.rebalance_timeout);
                *changed = true;
                return;
            }
            m.previous_epoch = m.epoch;
            m.epoch = epoch;
            *changed = true;
        }
        let missing = minus(&target, &self.members[member_id].assigned);
        let mut gained = Vec::new();
        for (t, ps) in &missing {
            for &p in ps {
                if !self.owned_by_other(member_id, t, p) {
                    gained.push((*t, p));
                }
            }
        }
        if !gained.is_empty() {
            let m = self.members.get_mut(member_id).expect("present");
            for (t, p) in gained {
                m.assigned.entry(t).or_default().insert(p);
            }
            *changed = true;
        }
    }
}

/// KIP-848 range: per topic, the members subscribed to it in member id
/// order each take a contiguous run, the first ones one more.
pub(super) fn range_assign(subs: &[(&str, Vec<(Uuid, i32)>)]) -> HashMap<String, Partitions> {
    let mut out: HashMap<String, Partitions> = subs
        .iter()
        .map(|(m, _)| (m.to_string(), Partitions::new()))
        .collect();
    let mut topics: BTreeMap<Uuid, (i32, Vec<&str>)> = BTreeMap::new();
    for (m, ts) in subs {
        for &(t, n) in ts {
            topics.entry(t).or_insert((n, Vec::new())).1.push(m);
        }
    }
    for (t, (n, mut members)) in topics {
        members.sort_unstable();
        let k = members.len() as i32;
        let (each, extra) = (n / k, n % k);
        let mut next = 0;
        for (i, m) in members.iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            let ps: BTreeSet<i32> = (next..next + take).collect();
            next += take;
            if !ps.is_empty() {
                out.get_mut(*m).expect("member").insert(t, ps);
            }
        }
    }
    out
}

/// KIP-848 uniform: balanced over all members, sticky: a member keeps what
/// it had as long as it stays within its share; the rest go to the least
/// loaded subscribed member.
pub(super) fn uniform_assign(
    subs: &[(&str, Vec<(Uuid, i32)>)],
    previous: &HashMap<String, Partitions>,
) -> HashMap<String, Partitions> {
    let subscribed: HashMap<&str, HashMap<Uuid, i32>> = subs
        .iter()
        .map(|(m, ts)| (*m, ts.iter().copied().collect()))
        .collect();
    let mut all: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for (_, ts) in subs {
        for &(t, n) in ts {
            all.extend((0..n).map(|p| (t, p)));
        }
    }
    // Shares count only members that can take something.
    let members = subs.iter().filter(|(_, ts)| !ts.is_empty()).count().max(1);
    let quota_max = all.len().div_ceil(members);
    let mut out: HashMap<String, Partitions> = subs
        .iter()
        .map(|(m, _)| (m.to_string(), Partitions::new()))
        .collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // Sticky part.
    let mut names: Vec<&str> = subs.iter().map(|(m, _)| *m).collect();
    names.sort_unstable();
    for m in &names {
        let Some(prev) = previous.get(*m) else {
            continue;
        };
        let mine = out.get_mut(*m).expect("member");
        let mut n = 0;
        for (t, ps) in prev {
            let Some(&count) = subscribed[m].get(t) else {
                continue;
            };
            for &p in ps {
                if p < count && n < quota_max && taken.insert((*t, p)) {
                    mine.entry(*t).or_default().insert(p);
                    n += 1;
                }
            }
        }
    }
    // The rest, each to the least loaded member subscribed to its topic.
    let load = |o: &HashMap<String, Partitions>, m: &str| count(&o[m]);
    for (t, p) in all {
        if taken.contains(&(t, p)) {
            continue;
        }
        let best = names
            .iter()
            .filter(|m| subscribed[**m].contains_key(&t))
            .min_by_key(|m| (load(&out, m), **m));
        if let Some(m) = best {
            out.get_mut(*m)
                .expect("member")
                .entry(t)
                .or_default()
                .insert(p);
        }
    }
    // Even out: move from the fullest to the emptiest while it helps.
    loop {
        let most = names
            .iter()
            .max_by_key(|m| (load(&out, m), std::cmp::Reverse(**m)));
        let least = names.iter().min_by_key(|m| (load(&out, m), **m));
        let (Some(&hi), Some(&lo)) = (most, least) else {
            break;
        };
        if load(&out, hi) <= load(&out, lo) + 1 {
            break;
        }
        let movable = out[hi]
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .find(|(t, _)| subscribed[lo].contains_key(t));
        let Some((t, p)) = movable else {
            break; // lo cannot take any of hi's topics
        };
        out.get_mut(hi)
            .expect("member")
            .get_mut(&t)
            .expect("topic")
            .remove(&p);
        out.get_mut(hi)
            .expect("member")
            .retain(|_, ps| !ps.is_empty());
        out.get_mut(lo)
            .expect("member")
            .entry(t)
            .or_default()
            .insert(p);
    }
    out
}
