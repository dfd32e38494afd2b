//! What a simulation run is asked to do: how many brokers, how long, which faults it draws,
//! and which safeguard (if any) is switched off to show the checks catch what it prevents.

/// One safeguard switched off, to show the invariants catch what it prevents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weakness {
    /// The leader acknowledges on its own append (`acks=1`).
    AcksOne,
    /// Followers acknowledge (fetch on) before their appends are even written, and the
    /// leader counts its log end rather than its synced end: a kill -9 loses acknowledged
    /// records.
    AckUnwritten,
    /// Replicas count a record once it is written, not synced (the rule before, and
    /// `write.caching=true`'s): followers fetch on once their appends are written and the
    /// leader counts its written end. The disk still syncs, but no acknowledgement waits for
    /// it: a power cut loses acknowledged records.
    FollowersDontSync,
    /// A leaderless partition elects any live replica
    /// (`unclean.leader.election.enable=true`).
    UncleanElection,
    /// An AlterPartition answer that leaves the outcome open (a stale-epoch refusal of a
    /// repeat that may have committed) drops the proposal as if refused.
    OpenAsRefused,
    /// A new follower truncates its log to its high watermark (Kafka before KIP-101).
    TruncateToHighWatermark,
}

impl std::str::FromStr for Weakness {
    type Err = String;
    fn from_str(s: &str) -> Result<Weakness, String> {
        match s {
            "acks1" => Ok(Weakness::AcksOne),
            "ack-unwritten" => Ok(Weakness::AckUnwritten),
            "followers-dont-sync" => Ok(Weakness::FollowersDontSync),
            "unclean" => Ok(Weakness::UncleanElection),
            "open-as-refused" => Ok(Weakness::OpenAsRefused),
            "truncate-to-hw" => Ok(Weakness::TruncateToHighWatermark),
            _ => Err(format!(
                "unknown weakness {s:?} (acks1, ack-unwritten, followers-dont-sync, unclean, \
                 open-as-refused, truncate-to-hw)"
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Brokers, each a replica of the one partition (3 to 5).
    pub nodes: usize,
    pub min_insync_replicas: usize,
    /// Faults and produce requests happen during this much simulated time...
    pub run_ms: u64,
    /// ...then every fault heals and the cluster has this long to settle.
    pub settle_ms: u64,
    pub weakness: Option<Weakness>,
    pub faults: FaultMix,
}

/// Which faults a seed's schedule draws.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FaultMix {
    /// Every kind, each about as often (the CI run's and `strand-sim`'s default).
    #[default]
    Mixed,
    /// Every kind, but half of the faults are whole-cluster power cuts: where a rule that
    /// counts unsynced records loses acknowledged ones soonest (`strand-sim --power-cuts`).
    PowerCuts,
}

impl SimConfig {
    /// The configuration seed `seed` runs with: 3 nodes (min ISR 2), one seed in four 5 nodes
    /// (min ISR 3).
    pub fn for_seed(seed: u64) -> SimConfig {
        let nodes = if seed % 4 == 3 { 5 } else { 3 };
        SimConfig {
            nodes,
            min_insync_replicas: nodes / 2 + 1,
            run_ms: 6_000,
            settle_ms: 6_000,
            weakness: None,
            faults: FaultMix::Mixed,
        }
    }
}
