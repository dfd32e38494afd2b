//! Security on the Kafka listeners: who a client is and what it may do.
//!
//! # Layout
//! - [`config`] — `listeners`, `listener.security.protocol.map`, `ssl.*`, `sasl.*`,
//!   `super.users`, `authorizer.class.name`, ... by Kafka's names.
//! - [`tls`] — the rustls server configuration (PEM, KIP-651) and a client certificate's
//!   principal (mTLS).
//! - [`session`] — one connection's authentication state machine: the gate before
//!   authentication and the SASL exchange (PLAIN, SCRAM-SHA-256/512 from
//!   `strand_wire::sasl`), KIP-368 re-authentication (sans-IO).
//! - [`acl`] — the authoriser: Kafka's ACL semantics, table-tested (sans-IO).
//! - [`store`] — SCRAM credentials and ACLs, durable in `<data_dir>/security.json`, read by
//!   shards without a lock.
//!
//! Arrows: `kafka` (the APIs and the connection) uses `security`; `security` uses only
//! `strand_wire` and the storage module's directory sync.

pub mod acl;
pub mod config;
pub mod session;
pub mod store;
pub mod tls;

use std::io;
use std::sync::Arc;

use self::acl::{Operation, ResourceType};
use self::config::SecurityConfig;
use self::session::Session;
use self::store::{SecurityState, SecurityStore};

/// The node's security: settings, the TLS configuration, credentials and ACLs.
pub struct Security {
    pub config: SecurityConfig,
    /// For TLS listeners (`None` when no listener uses TLS).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub store: SecurityStore,
}

impl Security {
    pub fn new(
        config: &SecurityConfig,
        listeners: &[config::Listener],
        data_dir: &std::path::Path,
    ) -> io::Result<Security> {
        let tls = if listeners.iter().any(|l| l.protocol.tls()) {
            Some(tls::server_config(&config.ssl)?)
        } else {
            None
        };
        let store = SecurityStore::open(
            data_dir,
            config.super_users.clone(),
            config.allow_everyone_if_no_acl_found,
        )?;
        Ok(Security {
            config: config.clone(),
            tls,
            store,
        })
    }

    /// The request-time view: the current state if ACLs are on.
    pub fn checker(&self, session: &Session) -> Checker {
        if !self.config.authorizer {
            return Checker {
                state: None,
                host: String::new(),
                principal: String::new(),
            };
        }
        Checker {
            state: Some(self.store.state()),
            host: session.host.clone(),
            principal: session.principal(),
        }
    }
}

/// Answers "may this connection do that?" for one request.
pub struct Checker {
    state: Option<Arc<SecurityState>>,
    host: String,
    principal: String,
}

impl Checker {
    /// Whether ACLs are checked at all (`authorizer.class.name`).
    pub fn on(&self) -> bool {
        self.state.is_some()
    }

    pub fn allows(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        match &self.state {
            None => true,
            Some(s) => s
                .authorizer
                .authorize(&self.principal, &self.host, op, rt, name),
        }
    }

    /// `op` on at least one resource of the type (KIP-679).
    pub fn allows_any(&self, op: Operation, rt: ResourceType) -> bool {
        match &self.state {
            None => true,
            Some(s) => s
                .authorizer
                .authorize_any(&self.principal, &self.host, op, rt),
        }
    }

    /// KIP-430's bit set for the resource; `all` is what Kafka reports without an authoriser.
    pub fn operations(&self, rt: ResourceType, name: &str, all: i32) -> i32 {
        match &self.state {
            None => all,
            Some(s) => s
                .authorizer
                .authorized_operations(&self.principal, &self.host, rt, name),
        }
    }

    pub fn cluster(&self, op: Operation) -> bool {
        self.allows(op, ResourceType::Cluster, acl::CLUSTER_NAME)
    }
}
