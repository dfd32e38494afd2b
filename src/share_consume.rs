//! `strand consume --group G --share`: a share-group consumer (KIP-932). Each record printed
//! is acknowledged (`--ack accept|release|reject`), the acknowledgements sent with the next
//! fetch; on exit they are sent and the share sessions closed.

use std::io::Write;
use std::process::ExitCode;

use strand_client::error::ClientError;
use strand_client::share::{Ack, ShareConsumer};

use crate::cli::{render, run, Conn, ConsumeArgs};

pub fn consume(conn: Conn, args: ConsumeArgs) -> ExitCode {
    let ack = match args.ack.as_str() {
        "accept" => Ack::Accept,
        "release" => Ack::Release,
        "reject" => Ack::Reject,
        other => {
            eprintln!("strand: --ack must be accept, release or reject, not {other:?}");
            return ExitCode::FAILURE;
        }
    };
    run(&conn, move |cluster, json| async move {
        let group = args.group.clone().unwrap_or_default();
        let mut consumer = ShareConsumer::subscribe(cluster, &group, &args.topic).await?;
        let out = std::io::stdout();
        let mut out = out.lock();
        let mut seen = 0u64;
        while args.num.is_none_or(|n| seen < n) {
            for (r, count) in consumer.poll().await? {
                if args.num.is_some_and(|n| seen >= n) {
                    // Not shown: back to the group at once.
                    consumer.acknowledge(&r, Ack::Release);
                    continue;
                }
                seen += 1;
                let line = render(&args.format, json, &r, Some(count));
                out.write_all(line.as_bytes()).map_err(ClientError::Io)?;
                consumer.acknowledge(&r, ack);
            }
            out.flush().map_err(ClientError::Io)?;
        }
        consumer.close().await
    })
}
