//! What machines and config servers send each other, their timers, and the periods and
//! timeouts of their requests.

use serde::Serialize;

/// How often the daemon re-reads a missing config, and for how long (SEED-FACTS 3).
pub const DAEMON_POLL_MS: u64 = 10_000;
pub const DAEMON_CONFIG_TIMEOUT_MS: u64 = 300_000;
/// How long Ignition waits before fetching again after a failed fetch (unverified; a
/// few seconds in practice).
pub const FETCH_RETRY_MS: u64 = 5_000;
/// A request unanswered this long failed.
pub const MACHINE_REQUEST_TIMEOUT_MS: u64 = 10_000;

/// The request-id tag of Machine Config Servers and booting machines.
pub const MCO_TAG: u16 = 0x0a00;

/// What machines and config servers tell each other (Ignition's HTTPS fetch), as
/// `Msg::Family` payloads.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum McoMsg {
    /// `GET /config/<pool>` from `machine`.
    GetConfig {
        id: u64,
        machine: String,
        pool: String,
    },
    /// The answer: the config's name (its content is what Ignition writes), or why not.
    Config {
        id: u64,
        result: Result<String, String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    /// The server's request `req` for machine-request `id` is abandoned if unanswered.
    ServerRequest {
        req: u64,
    },
    Machine(MachineTimer),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MachineTimer {
    /// Power on, or fetch again.
    Fetch,
    /// Request `req` is overdue.
    Timeout { req: u64 },
    /// The next step of the current phase is due (reboot done, joined, daemon up, retry).
    Next { step: u64 },
    /// The kubelet's periodic node Lease renew.
    RenewLease,
    /// The kubelet retries a failed Lease write.
    RetryLease,
}
