//! The faults a seed draws, overlapping, each for a fraction of a second to a few seconds,
//! then healed — crashes (kill -9, with restart), power cuts (with restart), pauses longer
//! than a session, a node isolated, a node cut from the controller only, a one-way cut, a
//! majority/minority split (the controller on a drawn side), a bridge (two halves that both
//! still reach one node), a controller failover, every broker crashing at once, and every
//! broker losing power at once.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::{Addr, FaultMix, CLIENT, CONTROLLER};
use crate::records::NodeId;

#[derive(Clone, Debug)]
pub(crate) enum Fault {
    /// kill -9: what was written survives, synced or not.
    Crash(NodeId),
    /// A power cut: only what was synced survives (and what the device happened to flush).
    PowerLoss(NodeId),
    Restart(NodeId),
    /// Paused (SIGSTOP) until the given time.
    Pause(NodeId, u64),
    Resume(NodeId),
    /// Links cut, by kind of fault.
    Cut(&'static str, Vec<(Addr, Addr)>),
    /// The links a cut took, back (each cut heals its own: faults overlap).
    Heal(Vec<(Addr, Addr)>),
    /// Another node becomes the active controller.
    ControllerFailover,
}

/// `(when, fault)` pairs for a run of `run_ms`; every fault ends (heals, restarts, resumes)
/// by `run_ms`.
pub(crate) fn schedule(
    rng: &mut ChaCha8Rng,
    nodes: usize,
    run_ms: u64,
    mix: FaultMix,
) -> Vec<(u64, Fault)> {
    let ids: Vec<NodeId> = (1..=nodes as NodeId).collect();
    let mut out = Vec::new();
    let mut t = rng.gen_range(300..1_200);
    while t < run_ms {
        let len = rng.gen_range(200..2_500).min(run_ms - t);
        let end = t + len;
        let n = *ids.choose(rng).unwrap_or(&1);
        let power_cut = mix == FaultMix::PowerCuts && rng.gen_bool(0.5);
        let kind = if power_cut { 8 } else { rng.gen_range(0..9) };
        match kind {
            0 => {
                // A process killed, or its host's power cut.
                let f = if rng.gen_bool(0.5) {
                    Fault::Crash(n)
                } else {
                    Fault::PowerLoss(n)
                };
                out.push((t, f));
                out.push((end, Fault::Restart(n)));
            }
            1 => {
                out.push((t, Fault::Pause(n, end)));
                out.push((end, Fault::Resume(n)));
            }
            2 => {
                let others: Vec<Addr> = everyone(nodes).into_iter().filter(|a| *a != n).collect();
                let links = both_ways(&[n], &others);
                out.push((t, Fault::Cut("isolate", links.clone())));
                out.push((end, Fault::Heal(links)));
            }
            3 => {
                let links = both_ways(&[n], &[CONTROLLER]);
                out.push((t, Fault::Cut("controller-cut", links.clone())));
                out.push((end, Fault::Heal(links)));
            }
            4 => {
                let m = *ids
                    .iter()
                    .filter(|&&x| x != n)
                    .collect::<Vec<_>>()
                    .choose(rng)
                    .unwrap_or(&&n);
                let to = if rng.gen_bool(0.3) { CONTROLLER } else { *m };
                let links = vec![(n, to)];
                out.push((t, Fault::Cut("one-way", links.clone())));
                out.push((end, Fault::Heal(links)));
            }
            5 => {
                // A minority (with or without the controller and the client) against the rest.
                let mut shuffled = ids.clone();
                shuffled.shuffle(rng);
                let mut minority: Vec<Addr> = shuffled[..(nodes - 1) / 2].to_vec();
                if rng.gen_bool(0.5) {
                    minority.push(CONTROLLER);
                }
                if rng.gen_bool(0.5) {
                    minority.push(CLIENT);
                }
                let rest: Vec<Addr> = everyone(nodes)
                    .into_iter()
                    .filter(|a| !minority.contains(a))
                    .collect();
                let links = both_ways(&minority, &rest);
                out.push((t, Fault::Cut("split", links.clone())));
                out.push((end, Fault::Heal(links)));
            }
            6 => {
                // A bridge: two sides that cannot reach each other, both reaching `n`.
                let mut others: Vec<Addr> =
                    everyone(nodes).into_iter().filter(|a| *a != n).collect();
                others.shuffle(rng);
                let half = others.len() / 2;
                let (a, b) = others.split_at(half);
                let links = both_ways(a, b);
                out.push((t, Fault::Cut("bridge", links.clone())));
                out.push((end, Fault::Heal(links)));
            }
            7 => {
                out.push((t, Fault::ControllerFailover));
            }
            _ => {
                // Every broker at once: all killed, or the power cut to all.
                let (kind, power): (&'static str, bool) = if !power_cut && rng.gen_bool(0.5) {
                    ("whole-cluster-crash", false)
                } else {
                    ("whole-cluster-power-loss", true)
                };
                for &m in &ids {
                    let f = if power {
                        Fault::PowerLoss(m)
                    } else {
                        Fault::Crash(m)
                    };
                    out.push((t, f));
                    out.push((end, Fault::Restart(m)));
                }
                out.push((t, Fault::Cut(kind, Vec::new())));
            }
        }
        // The next fault may start before this one ends: faults overlap (a crash during a
        // partition, two crashes close together, a paused leader and a crashed follower).
        t += rng.gen_range(100..1_500);
    }
    out
}

/// Every process: the controller, the brokers, the client.
fn everyone(nodes: usize) -> Vec<Addr> {
    let mut all = vec![CONTROLLER, CLIENT];
    all.extend(1..=nodes as Addr);
    all
}

fn both_ways(a: &[Addr], b: &[Addr]) -> Vec<(Addr, Addr)> {
    let mut links = Vec::new();
    for &x in a {
        for &y in b {
            links.push((x, y));
            links.push((y, x));
        }
    }
    links
}
