//! AlterUserScramCredentials (key 51, v0, KIP-554): adds, replaces and deletes users' SCRAM
//! credentials. The client salts and hashes (`kafka-configs --add-config
//! 'SCRAM-SHA-256=[password=...]'` sends salt, iterations and the salted password); the broker
//! keeps StoredKey and ServerKey, durably, before answering. One result per user, with Kafka's
//! errors: UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL (iterations outside
//! 4096..=16384, an empty name or salt), DUPLICATE_RESOURCE (a user and mechanism both
//! altered and deleted), RESOURCE_NOT_FOUND (deleting what is not there). Needs ALTER on the
//! cluster (checked in `authorize`).

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use strand_wire::kafka::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use strand_wire::sasl::scram::{
    ScramCredential, ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
};
use strand_wire::ErrorCode;

use super::acls_common::{change, str};
use crate::node::Node;

enum Op {
    Upsert(ScramCredential),
    Delete(ScramMechanism),
}

pub async fn handle(
    node: &Rc<Node>,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Per user, in the order first named: the first error, or the operations to apply.
    let mut users: BTreeMap<String, Result<Vec<Op>, (ErrorCode, String)>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut seen: Vec<(String, i8)> = Vec::new();
    let mut note = |name: &str, item: Result<Op, (ErrorCode, String)>, mechanism: i8| {
        if !users.contains_key(name) {
            order.push(name.to_string());
        }
        let entry = users.entry(name.to_string()).or_insert(Ok(Vec::new()));
        let duplicate = seen.iter().any(|(n, m)| n == name && *m == mechanism);
        seen.push((name.to_string(), mechanism));
        match (entry.as_mut(), item) {
            (Err(_), _) => {}
            (Ok(_), _) if duplicate => {
                *entry = Err((
                    ErrorCode::DuplicateResource,
                    format!("a credential of {name} is both altered and deleted, or named twice"),
                ))
            }
            (Ok(_), Err(e)) => *entry = Err(e),
            (Ok(ops), Ok(op)) => ops.push(op),
        }
    };
    let cluster = node.shared.config.cluster.is_some();
    for d in &req.deletions {
        let item = match ScramMechanism::from_kafka_code(d.mechanism) {
            None => Err((
                ErrorCode::UnsupportedSaslMechanism,
                "unknown SCRAM mechanism".into(),
            )),
            Some(m) => Ok(Op::Delete(m)),
        };
        note(d.name.as_str(), item, d.mechanism);
    }
    for u in &req.upsertions {
        let name = u.name.as_str();
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        let item = match ScramMechanism::from_kafka_code(u.mechanism) {
            None => Err((
                ErrorCode::UnsupportedSaslMechanism,
                "unknown SCRAM mechanism".into(),
            )),
            Some(_) if name.is_empty() => Err((
                ErrorCode::UnacceptableCredential,
                "Username must not be empty".into(),
            )),
            Some(_) if iterations < SCRAM_ITERATIONS_MIN => Err((
                ErrorCode::UnacceptableCredential,
                format!("Too few iterations: at least {SCRAM_ITERATIONS_MIN}"),
            )),
            Some(_) if iterations > SCRAM_ITERATIONS_MAX => Err((
                ErrorCode::UnacceptableCredential,
                format!("Too many iterations: at most {SCRAM_ITERATIONS_MAX}"),
            )),
            Some(_) if u.salt.is_empty() || u.salted_password.is_empty() => Err((
                ErrorCode::UnacceptableCredential,
                "salt and salted password must not be empty".into(),
            )),
            Some(m) if u.salted_password.len() != m.digest_len() => Err((
                ErrorCode::UnacceptableCredential,
                "salted password of the wrong length".into(),
            )),
            Some(m) => Ok(Op::Upsert(ScramCredential::from_salted_password(
                m,
                &u.salted_password,
                &u.salt,
                iterations,
            ))),
        };
        note(name, item, u.mechanism);
    }
    if cluster {
        for v in users.values_mut() {
            *v = Err((
                ErrorCode::UnknownServerError,
                "SCRAM credentials are node-local and not served in cluster mode yet (use `strand user add` on every node)".into(),
            ));
        }
    }
    let work: Vec<(String, Vec<Op>)> = order
        .iter()
        .filter_map(|name| match users.get_mut(name) {
            Some(Ok(ops)) => Some((name.clone(), std::mem::take(ops))),
            _ => None,
        })
        .collect();
    let applied = if work.is_empty() {
        Ok(Vec::new())
    } else {
        change(&node.shared, move |state| {
            let mut out = Vec::new();
            for (name, ops) in work {
                let missing = ops.iter().find_map(|op| match op {
                    Op::Delete(m) if state.credential(&name, *m).is_none() => Some(*m),
                    _ => None,
                });
                if let Some(m) = missing {
                    out.push((name, Some(format!("no {} credential to delete", m.name()))));
                    continue;
                }
                for op in ops {
                    match op {
                        Op::Upsert(c) => {
                            state.credentials.insert((name.clone(), c.mechanism), c);
                        }
                        Op::Delete(m) => {
                            state.credentials.remove(&(name.clone(), m));
                        }
                    }
                }
                out.push((name, None));
            }
            out
        })
        .await
    };
    let mut resp = AlterUserScramCredentialsResponse::default();
    let mut applied: BTreeMap<String, Option<String>> = match applied {
        Ok(a) => a.into_iter().collect(),
        Err(why) => {
            for v in users.values_mut() {
                if v.is_ok() {
                    *v = Err((ErrorCode::UnknownServerError, why.clone()));
                }
            }
            BTreeMap::new()
        }
    };
    for name in order {
        let mut r = AlterUserScramCredentialsResult::default();
        r.user = str(&name);
        match users.get(&name) {
            Some(Err((code, message))) => {
                r.error_code = code.code();
                r.error_message = Some(str(message));
            }
            _ => {
                if let Some(Some(message)) = applied.remove(&name) {
                    r.error_code = ErrorCode::ResourceNotFound.code();
                    r.error_message = Some(str(&message));
                }
            }
        }
        resp.results.push(r);
    }
    resp
}
