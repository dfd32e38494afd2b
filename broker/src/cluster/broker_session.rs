//! This node's broker in the cluster's eyes (KRaft's BrokerLifecycleManager): it registers
//! with the active controller (node id, a fresh incarnation, endpoints, shards), then sends a
//! heartbeat every `broker.heartbeat.interval.ms` naming the metadata offset it has applied
//! (`applied_here`: the offset its shards serve, not just the driver's image).
//! The controller unfences it once it has caught up with its own registration and fences it
//! when heartbeats stop for `broker.session.timeout.ms`.
//!
//! DUPLICATE_BROKER_REGISTRATION (the `node.id` is registered by a broker whose session has
//! not expired: another live process with this id, or this node's previous incarnation just
//! restarted) is logged with the controller's message and asked again every interval, as
//! Kafka's BrokerLifecycleManager does; the broker stays fenced (leads nothing) meanwhile.
//! INCONSISTENT_CLUSTER_ID ends [`run`] with the controller's message: the process should
//! exit rather than serve another cluster. A stale epoch (the controller lost our
//! registration to a restart of ours) registers again.

use std::cell::Cell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::time::Duration;

use strand_cluster_core::controller::Heartbeat;
use strand_cluster_core::controller_rpc::Request;
use strand_cluster_core::records::BrokerRegistration;
use strand_wire::ErrorCode;

use super::metadata_driver::MetadataDriver;

/// What this broker knows of its own standing.
#[derive(Default)]
pub struct BrokerSession {
    /// 0 until registered.
    pub epoch: Cell<u64>,
    pub fenced: Cell<bool>,
    /// Set to end [`run`] (a controlled shutdown heartbeat is sent first).
    pub stopping: Cell<bool>,
}

/// `fut`, unless `stop` completes first (then `session.stopping` is set and `stop` is never
/// polled again).
async fn unless_stopped<T>(
    fut: impl Future<Output = T>,
    stop: &mut Pin<&mut impl Future<Output = ()>>,
    session: &BrokerSession,
) -> Option<T> {
    if session.stopping.get() {
        return None;
    }
    let done = futures_lite::future::or(async { Some(fut.await) }, async {
        stop.as_mut().await;
        None
    })
    .await;
    if done.is_none() {
        session.stopping.set(true);
    }
    done
}

/// Registers and heartbeats until `stop` completes (the process got a stop signal) or
/// `session.stopping` is set; then, if registered, sends the controlled-shutdown heartbeat
/// and waits at most one heartbeat interval for its answer. An error is a refusal this
/// broker must not ignore.
pub async fn run(
    driver: MetadataDriver,
    registration: BrokerRegistration,
    heartbeat_interval_ms: u64,
    session: Rc<BrokerSession>,
    applied_here: Rc<dyn Fn() -> u64>,
    stop: impl Future<Output = ()>,
) -> Result<(), String> {
    let interval = Duration::from_millis(heartbeat_interval_ms);
    let mut stop = pin!(stop);
    session.fenced.set(true);
    while !session.stopping.get() && !driver.is_stopped() {
        if session.epoch.get() == 0 {
            let call = driver.call(Request::Register(registration.clone()), interval * 2);
            let Some(a) = unless_stopped(call, &mut stop, &session).await else {
                break;
            };
            match a.error {
                None => {
                    tracing::info!(
                        node = registration.node_id,
                        epoch = a.broker_epoch,
                        "registered with the controller"
                    );
                    session.epoch.set(a.broker_epoch);
                    session.fenced.set(a.fenced);
                    // Heartbeat once our image holds the registration: that one unfences us.
                    let applied = driver.applied(a.metadata_offset, interval);
                    let _ = unless_stopped(applied, &mut stop, &session).await;
                    continue;
                }
                Some((ErrorCode::DuplicateBrokerRegistration, why)) => {
                    tracing::warn!(
                        node = registration.node_id,
                        "broker registration refused (DUPLICATE_BROKER_REGISTRATION): {why}; asking again"
                    );
                }
                Some((
                    code @ (ErrorCode::InconsistentClusterId | ErrorCode::InvalidRequest),
                    why,
                )) => {
                    return Err(format!("broker registration refused ({code:?}): {why}"));
                }
                Some((code, why)) => {
                    tracing::debug!(?code, %why, "registration not answered yet; trying again");
                }
            }
        } else {
            let hb = Heartbeat {
                node_id: registration.node_id,
                broker_epoch: session.epoch.get(),
                metadata_offset: applied_here(),
                shutting_down: false,
            };
            let call = driver.call(Request::Heartbeat(hb), interval * 2);
            let Some(a) = unless_stopped(call, &mut stop, &session).await else {
                break;
            };
            match a.error {
                None => {
                    if session.fenced.get() != a.fenced {
                        tracing::info!(
                            node = registration.node_id,
                            fenced = a.fenced,
                            "broker fencing changed"
                        );
                    }
                    session.fenced.set(a.fenced);
                }
                Some((ErrorCode::StaleBrokerEpoch | ErrorCode::BrokerIdNotRegistered, why)) => {
                    tracing::warn!(node = registration.node_id, %why, "registering again");
                    session.epoch.set(0);
                    session.fenced.set(true);
                    continue;
                }
                Some((code, why)) => {
                    tracing::debug!(?code, %why, "heartbeat not answered");
                }
            }
        }
        let _ = unless_stopped(glommio::timer::sleep(interval), &mut stop, &session).await;
    }
    if session.epoch.get() != 0 && !driver.is_stopped() {
        // Controlled shutdown: the controller moves our leaderships away now rather than
        // after the session times out.
        let hb = Heartbeat {
            node_id: registration.node_id,
            broker_epoch: session.epoch.get(),
            metadata_offset: applied_here(),
            shutting_down: true,
        };
        let a = driver.call(Request::Heartbeat(hb), interval).await;
        match a.error {
            None => tracing::info!(
                node = registration.node_id,
                "controlled shutdown: fenced, leaderships moved"
            ),
            // REQUEST_TIMED_OUT (no controller): the session expires instead. A refused
            // partition change in the fence batch (a stale epoch) is repaired by the
            // controller's next tick.
            Some((code, why)) => tracing::warn!(
                node = registration.node_id,
                ?code,
                "controlled shutdown answered with an error ({why}); the controller fences this node at session expiry if the fence did not apply"
            ),
        }
        session.fenced.set(true);
    }
    Ok(())
}
