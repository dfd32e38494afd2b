//! The broker's side of a SASL exchange with hostile bytes: PLAIN tokens and SCRAM
//! client-first / client-final messages (`strand_wire::sasl`). Whatever the client sends,
//! the server answers or refuses — it never panics. The first byte picks the mechanism and
//! where the input splits into the two SCRAM messages; a known user exists so that a
//! well-formed client-first reaches the proof check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_wire::sasl::plain;
use strand_wire::sasl::scram::{ScramCredential, ScramMechanism, ScramServer};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let split = (usize::from(selector >> 2)).min(rest.len());
    let (first, last) = rest.split_at(split);
    match selector & 3 {
        0 => {
            let _ = plain::parse(rest);
        }
        choice => {
            let m = if choice == 1 {
                ScramMechanism::Sha256
            } else {
                ScramMechanism::Sha512
            };
            // The server nonce is fixed so a fuzzer can learn a valid client-final.
            let mut server = ScramServer::with_nonce(m, "fuzz-server-nonce");
            let Ok(user) = server.client_first(first) else {
                return;
            };
            let credential = (user == "user")
                .then(|| ScramCredential::from_password(m, "pencil", b"salt-of-the-earth", 4096));
            if server.server_first(credential).is_ok() {
                let _ = server.client_final(last);
            }
            // Out-of-order calls on a finished or failed exchange must refuse, not panic.
            let _ = server.client_final(last);
            let _ = server.client_first(first);
        }
    }
});
