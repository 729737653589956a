//! The target assignment (Kafka's `sticky` task assignor) and each
//! member's reconciliation towards it.

use super::topology::Invalid;
use super::*;

impl StreamsGroup {
    /// The epoch members reconcile to: the assignment epoch, or (while the
    /// initial delay holds the first assignment back) at least 1.
    pub(super) fn target_epoch(&self) -> i32 {
        if self.delay_until.is_some() {
            self.assignment_epoch.max(1)
        } else {
            self.assignment_epoch
        }
    }

    /// Configures the topology again when the topics it names changed;
    /// a change of what it decides is a new group epoch.
    pub(super) fn reconfigure(&mut self, topics: &TopicsView) -> Result<(), Invalid> {
        let Some(t) = &self.topology else {
            return Ok(());
        };
        if self.awaiting_view {
            // Just loaded: its topics are not in view yet (they come with
            // the next refresh); the stored target holds meanwhile.
            return Ok(());
        }
        let seen: BTreeMap<String, (uuid::Uuid, i32)> = t
            .topic_names()
            .into_iter()
            .filter_map(|n| topics.get(&n).map(|v| (n, *v)))
            .collect();
        if self.configured.as_ref().is_some_and(|c| c.seen == seen) {
            return Ok(());
        }
        let c = t.configure(topics)?;
        let epoch = t.epoch;
        let moved = match &self.configured {
            // Just loaded: the stored target holds if the topology was
            // runnable then, with the same tasks, and is now.
            None => {
                !(c.is_ready()
                    && self.validated_topology_epoch == epoch
                    && self.stored_tasks == c.tasks)
            }
            Some(old) => old.tasks != c.tasks || old.is_ready() != c.is_ready(),
        };
        if let Some((code, detail)) = &c.problem {
            tracing::debug!(group = %self.group_id, code, %detail, "streams group topology not ready");
        }
        self.validated_topology_epoch = if c.is_ready() { epoch } else { -1 };
        self.configured = Some(c);
        if moved && !self.members.is_empty() {
            self.bump();
        }
        Ok(())
    }

    /// Recomputes the target assignment when the group epoch moved (and
    /// the initial delay is over).
    pub fn maybe_assign(&mut self, topics: &TopicsView) {
        if let Err((_, message)) = self.reconfigure(topics) {
            // Not for a stored topology (checked when it came): logged
            // without repeating.
            tracing::debug!(group = %self.group_id, %message, "streams group topology cannot be configured");
        }
        if self.group_epoch <= self.assignment_epoch || self.delay_until.is_some() {
            return;
        }
        let members: Vec<(&str, &str)> = self
            .members
            .values()
            .map(|m| (m.member_id.as_str(), m.process_id.as_str()))
            .collect();
        self.target = match self.configured.as_ref().filter(|c| c.is_ready()) {
            Some(c) => sticky(
                &members,
                &c.tasks,
                &c.stateful,
                self.standby_replicas,
                &self.target,
            ),
            None => members
                .iter()
                .map(|(m, _)| (m.to_string(), Tasks::default()))
                .collect(),
        };
        self.assignment_epoch = self.group_epoch;
    }

    /// Whether a member other than `except` owns the task as active
    /// (assigned or being revoked).
    fn active_elsewhere(&self, except: &str, s: &str, p: i32) -> bool {
        self.members.values().any(|m| {
            m.member_id != except
                && (set_contains(&m.assigned.active, s, p)
                    || set_contains(&m.revoking.active, s, p))
        })
    }

    /// Whether another member of `process` holds the task (of any kind).
    fn process_holds_elsewhere(&self, except: &str, process: &str, s: &str, p: i32) -> bool {
        self.members.values().any(|m| {
            m.member_id != except
                && m.process_id == process
                && (m.assigned.holds(s, p) || m.revoking.holds(s, p))
        })
    }

    /// Moves a member towards its target: first it revokes what the target
    /// no longer holds; then it takes the target epoch and every target
    /// task no other member still owns (an active task nowhere else
    /// active nor in its process; a standby nowhere else in its process).
    pub(super) fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&Tasks>,
        now: Instant,
        changed: &mut bool,
    ) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let epoch = self.target_epoch();
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if !m.revoking.is_empty() {
            match owned {
                Some(o) if !o.intersects(&m.revoking) => {
                    m.revoking = Tasks::default();
                    m.revoke_deadline = None;
                    let keep = &m.assigned.active;
                    m.active_epochs
                        .retain(|(s, p), _| set_contains(keep, s, *p));
                    *changed = true;
                }
                _ => return, // still revoking
            }
        }
        if m.epoch != epoch {
            let give_up = m.assigned.minus(&target);
            if !give_up.is_empty() {
                m.assigned = m.assigned.minus(&give_up);
                m.revoking = give_up;
                m.revoke_deadline = Some(now + m.rebalance_timeout);
                *changed = true;
                return;
            }
            m.previous_epoch = m.epoch;
            m.epoch = epoch;
            *changed = true;
        }
        let process = m.process_id.clone();
        let missing = target.minus(&m.assigned);
        let mut gained = Tasks::default();
        for (s, ps) in &missing.active {
            for &p in ps {
                if !self.active_elsewhere(member_id, s, p)
                    && !self.process_holds_elsewhere(member_id, &process, s, p)
                {
                    set_insert(&mut gained.active, s, p);
                }
            }
        }
        for (s, ps) in &missing.standby {
            for &p in ps {
                if !self.process_holds_elsewhere(member_id, &process, s, p) {
                    set_insert(&mut gained.standby, s, p);
                }
            }
        }
        if gained.is_empty() {
            return;
        }
        let m = self.members.get_mut(member_id).expect("present");
        for (s, ps) in gained.active {
            for p in ps {
                m.active_epochs.insert((s.clone(), p), epoch);
                set_insert(&mut m.assigned.active, &s, p);
            }
        }
        for (s, ps) in gained.standby {
            for p in ps {
                set_insert(&mut m.assigned.standby, &s, p);
            }
        }
        *changed = true;
    }
}

/// Kafka's sticky task assignor, in its essentials: active tasks stay with
/// their previous owner while it is within its share, then go to a
/// previous standby, then to the least loaded process (and its least
/// loaded member); standbys of stateful tasks go to other processes,
/// previous owners first. `members`: (member id, process id).
pub(super) fn sticky(
    members: &[(&str, &str)],
    tasks: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    standbys: u32,
    previous: &HashMap<String, Tasks>,
) -> HashMap<String, Tasks> {
    let mut out: HashMap<String, Tasks> = members
        .iter()
        .map(|(m, _)| (m.to_string(), Tasks::default()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let process_of: HashMap<&str, &str> = members.iter().copied().collect();
    let mut process_size: HashMap<&str, usize> = HashMap::new();
    for (_, p) in members {
        *process_size.entry(p).or_default() += 1;
    }
    let all: Vec<(String, i32)> = tasks
        .iter()
        .flat_map(|(s, &n)| (0..n.max(0)).map(move |p| (s.clone(), p)))
        .collect();
    let quota = all.len().div_ceil(members.len());
    let mut prev_active: HashMap<(&str, i32), &str> = HashMap::new();
    let mut prev_standby: HashMap<(&str, i32), Vec<&str>> = HashMap::new();
    for (m, t) in previous {
        let Some((m, _)) = members.iter().find(|(id, _)| id == m) else {
            continue;
        };
        for (s, ps) in &t.active {
            for &p in ps {
                prev_active.insert((s.as_str(), p), m);
            }
        }
        for (s, ps) in &t.standby {
            for &p in ps {
                prev_standby.entry((s.as_str(), p)).or_default().push(m);
            }
        }
    }
    // How loaded a member's process is (per member), then the member;
    // both kept as tasks are placed (`Load::add`).
    let mut load = Load {
        member: members.iter().map(|(m, _)| (*m, 0)).collect(),
        process: HashMap::new(),
        process_of: &process_of,
        process_size: &process_size,
    };
    let mut by_partition = all.clone();
    by_partition.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let mut rest = Vec::new();
    for (s, p) in by_partition {
        let owner = prev_active
            .get(&(s.as_str(), p))
            .copied()
            .filter(|m| load.member[m] < quota)
            .or_else(|| {
                prev_standby
                    .get(&(s.as_str(), p))
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|m| load.member[m] < quota)
                    .min_by_key(|m| load.rank(m))
            });
        match owner {
            Some(m) => {
                set_insert(&mut out.get_mut(m).expect("member").active, &s, p);
                load.add(m);
            }
            None => rest.push((s, p)),
        }
    }
    rest.sort();
    for (s, p) in rest {
        let m = members
            .iter()
            .map(|(m, _)| *m)
            .min_by_key(|m| load.rank(m))
            .expect("members");
        set_insert(&mut out.get_mut(m).expect("member").active, &s, p);
        load.add(m);
    }
    if standbys == 0 {
        return out;
    }
    for (s, p) in all.iter().filter(|(s, _)| stateful.contains(s)) {
        for _ in 0..standbys {
            let held: BTreeSet<&str> = members
                .iter()
                .filter(|(m, _)| out[*m].holds(s, *p))
                .map(|(_, proc_id)| *proc_id)
                .collect();
            let free = |m: &&str| !held.contains(process_of[*m]);
            let previous = prev_standby
                .get(&(s.as_str(), *p))
                .into_iter()
                .flatten()
                .copied()
                .chain(prev_active.get(&(s.as_str(), *p)).copied())
                .filter(free)
                .min_by_key(|m| load.rank(m));
            let Some(m) = previous.or_else(|| {
                members
                    .iter()
                    .map(|(m, _)| *m)
                    .filter(free)
                    .min_by_key(|m| load.rank(m))
            }) else {
                tracing::warn!(task = %format!("{s}_{p}"), "not enough processes for the standby replicas of a task");
                break;
            };
            set_insert(&mut out.get_mut(m).expect("member").standby, s, *p);
            load.add(m);
        }
    }
    out
}

/// Tasks placed per member and per process, for the sticky assignor.
struct Load<'a> {
    member: HashMap<&'a str, usize>,
    process: HashMap<&'a str, usize>,
    process_of: &'a HashMap<&'a str, &'a str>,
    process_size: &'a HashMap<&'a str, usize>,
}

impl<'a> Load<'a> {
    fn add(&mut self, m: &'a str) {
        *self.member.entry(m).or_default() += 1;
        *self.process.entry(self.process_of[m]).or_default() += 1;
    }

    /// Least loaded first: the process's load per member, then the
    /// member's, then its id.
    fn rank(&self, m: &'a str) -> (usize, usize, &'a str) {
        let p = self.process_of[m];
        let per_member =
            self.process.get(p).copied().unwrap_or(0) * 1000 / self.process_size[p].max(1);
        (per_member, self.member[m], m)
    }
}
