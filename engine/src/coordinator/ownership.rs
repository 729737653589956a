//! Who coordinates a key: rendezvous (highest random weight) hashing over
//! the live agents.

use std::sync::Arc;

use rutomq_meta::AgentRecord;

/// Whether this agent coordinates a key (by its current view).
pub type Owns = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Rendezvous (highest random weight) hashing: the agent with the highest
/// score for a key coordinates it, so when an agent comes or goes only the
/// keys it wins or held move.
pub fn rendezvous_score(key: &str, agent_id: i32) -> u64 {
    // FNV-1a over the key, then splitmix64 with the agent id: stable across
    // processes and versions (clients are routed by it).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ (agent_id as u32 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The agent of `agents` that coordinates `key`: the highest rendezvous
/// score, ties broken by the higher agent id. `None` when `agents` is
/// empty.
pub fn owner_of<'a>(key: &str, agents: &'a [AgentRecord]) -> Option<&'a AgentRecord> {
    agents
        .iter()
        .max_by_key(|a| (rendezvous_score(key, a.agent_id), a.agent_id))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn rendezvous_moves_only_the_keys_of_a_removed_agent() {
        let pick = |key: &str, agents: &[i32]| {
            *agents
                .iter()
                .max_by_key(|&&a| (rendezvous_score(key, a), a))
                .unwrap()
        };
        let all = [1, 2, 3, 4];
        let without_3 = [1, 2, 4];
        let mut per_agent = HashMap::new();
        for i in 0..4000 {
            let key = format!("group-{i}");
            let before = pick(&key, &all);
            let after = pick(&key, &without_3);
            *per_agent.entry(before).or_insert(0) += 1;
            if before != 3 {
                assert_eq!(before, after, "{key} moved although its agent stayed");
            }
        }
        for a in all {
            let n = per_agent[&a];
            assert!((800..1200).contains(&n), "agent {a} got {n} of 4000 keys");
        }
    }

    #[test]
    fn the_owner_is_the_agent_with_the_highest_score() {
        let agent = |agent_id| AgentRecord {
            agent_id,
            host: "localhost".into(),
            port: 9092,
            rack: None,
            listeners: Vec::new(),
        };
        let agents: Vec<AgentRecord> = (1..=5).map(agent).collect();
        assert!(owner_of("g", &[]).is_none());
        for i in 0..100 {
            let key = format!("group-{i}");
            let best = (1..=5)
                .max_by_key(|&a| (rendezvous_score(&key, a), a))
                .unwrap();
            assert_eq!(owner_of(&key, &agents).unwrap().agent_id, best);
        }
    }
}
