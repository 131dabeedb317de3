//! What a Go program sees of the world, as data: its clocks, its entropy, its files,
//! its sockets and what it is waiting for. The WASI functions ([`crate::wasi`]) read
//! and write this; the bridge ([`crate::bridge`]) sets the clocks at each step, hands
//! the sockets what the network brought, and takes what the program wrote. Nothing
//! here reaches the host: no clock, no entropy, no file, no socket of the machine.

use crate::files::Files;
use rand::{Rng, SeedableRng};
use reconsim_sim::{SimRng, SimTime};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Where a run's monotonic clock starts, as for kube-rs programs
/// (`reconsim_kube::intercept::MONOTONIC_BASE_SECS`): an uptime, so code that
/// subtracts an hour from `time.Now()`'s monotonic reading does not underflow.
pub const MONOTONIC_BASE_NS: u64 = reconsim_kube::intercept::MONOTONIC_BASE_SECS * 1_000_000_000;
/// The wall-clock instant a run's time 0 stands for (2026-01-01T00:00:00Z), the
/// wire's epoch, so an object created a moment ago is a moment old to `time.Now()`.
pub const EPOCH_NS: u64 = reconsim_kube::intercept::EPOCH_UNIX_SECS * 1_000_000_000;

/// WASI preview 1's errno values (`syscall/tables_wasip1.go`, the same numbers).
pub mod errno {
    pub const SUCCESS: i32 = 0;
    pub const ACCES: i32 = 2;
    pub const AGAIN: i32 = 6;
    pub const BADF: i32 = 8;
    pub const CONNREFUSED: i32 = 14;
    pub const CONNRESET: i32 = 15;
    pub const EXIST: i32 = 20;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const IO: i32 = 29;
    pub const ISDIR: i32 = 31;
    pub const NOENT: i32 = 44;
    pub const NOSYS: i32 = 52;
    pub const NOTCONN: i32 = 53;
    pub const NOTDIR: i32 = 54;
    pub const NOTSUP: i32 = 58;
    pub const PIPE: i32 = 64;
    pub const ROFS: i32 = 69;
    pub const SPIPE: i32 = 70;
}

/// A socket's number among the program's sockets, never reused within a run of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SocketId(pub u32);

/// One of the program's TCP connections, as bytes each way. The bridge reads what the
/// program wrote (`tx`) and gives it what the peer sent (`rx`).
#[derive(Debug, Default)]
pub struct Socket {
    /// `host:port` as the program dialled it.
    pub addr: String,
    /// Bytes the program wrote and the bridge has not taken yet.
    pub tx: Vec<u8>,
    /// Bytes the peer sent and the program has not read yet.
    pub rx: VecDeque<u8>,
    /// The peer closed its side: once `rx` is read, reads return 0 (end of file).
    pub eof: bool,
    /// The connection broke (reset by the peer's host, or given up on): reads and
    /// writes fail with ECONNRESET.
    pub reset: bool,
    /// The program closed it.
    pub closed: bool,
    /// The program shut its write side.
    pub write_shut: bool,
}

/// What a file descriptor stands for.
#[derive(Debug, Clone)]
pub enum Fd {
    Stdin,
    Stdout,
    Stderr,
    /// A directory of the in-memory tree, by its path ("/" for the preopen).
    Dir(String),
    /// A regular file of the tree, read from `pos`.
    File {
        data: Arc<[u8]>,
        pos: u64,
    },
    Socket(SocketId),
}

/// The stream a log line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What the program waits for in `poll_oneoff` when nothing it asked for is ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wait {
    /// The monotonic instant (ns) its clock subscription ends, if it has one.
    pub deadline_ns: Option<u64>,
}

/// What a program's initialisation left in its host, carried into each run that
/// starts from its snapshot ([`crate::snapshot`]).
#[derive(Debug, Clone)]
pub struct InitState {
    wall_reads: u64,
    fds: BTreeMap<u32, Fd>,
    next_fd: u32,
    line: [Vec<u8>; 2],
    lines: Vec<(Stream, String)>,
}

/// A Go program's world, one per start of its process.
#[derive(Debug)]
pub struct Host {
    monotonic_ns: u64,
    wall_ns: u64,
    wall_reads: u64,
    entropy: SimRng,
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub files: Arc<Files>,
    pub fds: BTreeMap<u32, Fd>,
    next_fd: u32,
    pub sockets: BTreeMap<SocketId, Socket>,
    next_socket: u32,
    /// Sockets the program opened since the bridge last looked.
    pub dialled: Vec<SocketId>,
    /// The `host:port`s a dial reaches; any other is refused (ECONNREFUSED).
    pub reachable: Vec<String>,
    line: [Vec<u8>; 2],
    /// Whole lines the program wrote to stdout and stderr, not yet taken.
    pub lines: Vec<(Stream, String)>,
    /// Set while the program waits in `poll_oneoff`.
    pub wait: Option<Wait>,
    /// `sched_yield` calls since the last wait: a program that only yields is busy.
    pub yields: u64,
    /// Dials the program attempted, reached or refused.
    pub dials: u64,
    /// The socket reconsim's overlay reads signals from ([`SIGNALS`]), once dialled.
    pub signals: Option<SocketId>,
}

/// The address the overlay dials for its signals: a socket of the host's own, never
/// the network's, whose bytes are signal numbers.
pub const SIGNALS: &str = "reconsim.signals";

/// SIGTERM's number on wasip1 (`syscall/syscall_wasip1.go`).
pub const SIGTERM: u8 = 15;

impl Host {
    /// A program's world at `now`, its entropy a stream of its own seeded by one draw
    /// of `rng` (the process's stream), so the program's draws never shift the
    /// process's.
    pub fn new(rng: &mut SimRng, args: Vec<String>, env: Vec<String>, files: Arc<Files>) -> Self {
        let mut fds = BTreeMap::new();
        fds.insert(0, Fd::Stdin);
        fds.insert(1, Fd::Stdout);
        fds.insert(2, Fd::Stderr);
        // Go's syscall package finds its preopened directories from fd 3 up
        // (`syscall/fs_wasip1.go`, init): one, the root of the in-memory tree.
        fds.insert(3, Fd::Dir("/".to_string()));
        Host {
            monotonic_ns: MONOTONIC_BASE_NS,
            wall_ns: EPOCH_NS,
            wall_reads: 0,
            entropy: SimRng::seed_from_u64(rng.next_u64()),
            args,
            env,
            files,
            fds,
            next_fd: 4,
            sockets: BTreeMap::new(),
            next_socket: 0,
            dialled: Vec::new(),
            reachable: Vec::new(),
            line: [Vec::new(), Vec::new()],
            lines: Vec::new(),
            wait: None,
            yields: 0,
            dials: 0,
            signals: None,
        }
    }

    /// The world a program's initialisation runs in when its snapshot is taken: the
    /// clocks at the run's time 0 (never moved), entropy from a stream seeded by the
    /// arguments and the environment, so the state it leaves is the same whenever it
    /// is taken, and differs between two replicas (their `POD_NAME`s differ).
    pub fn initializing(args: Vec<String>, env: Vec<String>, files: Arc<Files>) -> Self {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for s in args.iter().chain([&String::new()]).chain(env.iter()) {
            h.update(s.as_bytes());
            h.update([0]);
        }
        let digest = h.finalize();
        let seed = u64::from_le_bytes(digest[..8].try_into().expect("eight bytes"));
        Host::new(&mut SimRng::seed_from_u64(seed), args, env, files)
    }

    /// What initialisation left here.
    pub fn init_state(&self) -> InitState {
        InitState {
            wall_reads: self.wall_reads,
            fds: self.fds.clone(),
            next_fd: self.next_fd,
            line: self.line.clone(),
            lines: self.lines.clone(),
        }
    }

    /// Takes on what a snapshot's initialisation left (`init`): its descriptors, its
    /// unfinished and finished lines, and its wall-clock reads, which go on counting
    /// when the wall clock still reads the epoch (a start at time 0 without skew).
    pub fn adopt(&mut self, init: &InitState) {
        if self.wall_ns == EPOCH_NS {
            self.wall_reads = init.wall_reads;
        }
        self.fds = init.fds.clone();
        self.next_fd = init.next_fd;
        self.line = init.line.clone();
        let mut lines = init.lines.clone();
        lines.append(&mut self.lines);
        self.lines = lines;
    }

    /// The clocks at this instant: the monotonic one follows true time, the wall one
    /// the process's own clock (with its skew).
    pub fn set_time(&mut self, true_now: SimTime, local_now: SimTime) {
        self.monotonic_ns = MONOTONIC_BASE_NS + true_now.as_ms() * 1_000_000;
        let wall_ns = EPOCH_NS + local_now.as_ms() * 1_000_000;
        if wall_ns != self.wall_ns {
            self.wall_reads = 0;
        }
        self.wall_ns = wall_ns;
    }

    /// The monotonic clock: it stands still within a step, so Go's timers fire at
    /// their virtual deadlines, not a tick late.
    pub fn monotonic_ns(&self) -> u64 {
        self.monotonic_ns
    }

    /// The wall clock as one read sees it: a nanosecond later than the read before,
    /// as real time passes between a wake-up and the code that reads the clock (the
    /// same rule as kube-rs programs', `reconsim_kube::intercept`).
    pub fn read_wall_ns(&mut self) -> u64 {
        self.wall_reads += 1;
        self.wall_ns + self.wall_reads
    }

    /// Bytes from the program's entropy stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.entropy.fill_bytes(buf);
    }

    fn take_fd(&mut self) -> u32 {
        let fd = self.next_fd;
        self.next_fd += 1;
        fd
    }

    /// A new descriptor for `what`.
    pub fn open(&mut self, what: Fd) -> u32 {
        let fd = self.take_fd();
        self.fds.insert(fd, what);
        fd
    }

    /// A new connection to `addr`: its descriptor, or ECONNREFUSED for an address
    /// nobody serves. The bridge sends its bytes when the program writes them.
    pub fn dial(&mut self, addr: &str) -> Result<u32, i32> {
        self.dials += 1;
        if addr == SIGNALS && self.signals.is_none() {
            let id = self.new_socket(addr);
            self.signals = Some(id);
            return Ok(self.open(Fd::Socket(id)));
        }
        if !self.reachable.iter().any(|r| r == addr) {
            return Err(errno::CONNREFUSED);
        }
        let id = self.new_socket(addr);
        self.dialled.push(id);
        Ok(self.open(Fd::Socket(id)))
    }

    /// A socket to `addr`, numbered after the last.
    fn new_socket(&mut self, addr: &str) -> SocketId {
        self.next_socket += 1;
        let id = SocketId(self.next_socket);
        self.sockets.insert(
            id,
            Socket {
                addr: addr.to_string(),
                ..Socket::default()
            },
        );
        id
    }

    /// Sends the program signal `sig` through its signals socket: `false` if it has
    /// none (a program built without reconsim's overlay, or one that closed it).
    pub fn signal(&mut self, sig: u8) -> bool {
        match self.signals.and_then(|id| self.sockets.get_mut(&id)) {
            Some(s) if !s.closed => {
                s.rx.push_back(sig);
                true
            }
            _ => false,
        }
    }

    /// Output to stdout or stderr, kept as whole lines.
    pub fn log(&mut self, stream: Stream, bytes: &[u8]) {
        let buf = &mut self.line[stream as usize];
        for &b in bytes {
            if b == b'\n' {
                let text = String::from_utf8_lossy(buf).into_owned();
                buf.clear();
                self.lines.push((stream, text));
            } else if buf.len() < 64 * 1024 {
                buf.push(b);
            }
        }
    }

    /// The log lines written since the last call.
    pub fn take_lines(&mut self) -> Vec<(Stream, String)> {
        std::mem::take(&mut self.lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        let mut rng = SimRng::seed_from_u64(1);
        Host::new(&mut rng, vec![], vec![], Arc::new(Files::default()))
    }

    #[test]
    fn the_wall_clock_moves_a_nanosecond_a_read_and_the_monotonic_one_stands_still() {
        let mut h = host();
        h.set_time(SimTime::from_ms(1_500), SimTime::from_ms(1_700));
        assert_eq!(h.monotonic_ns(), MONOTONIC_BASE_NS + 1_500_000_000);
        assert_eq!(h.read_wall_ns(), EPOCH_NS + 1_700_000_001);
        assert_eq!(h.read_wall_ns(), EPOCH_NS + 1_700_000_002);
        assert_eq!(h.monotonic_ns(), MONOTONIC_BASE_NS + 1_500_000_000);
        h.set_time(SimTime::from_ms(1_501), SimTime::from_ms(1_701));
        assert_eq!(h.read_wall_ns(), EPOCH_NS + 1_701_000_001);
    }

    #[test]
    fn log_lines_are_whole_lines_per_stream() {
        let mut h = host();
        h.log(Stream::Stdout, b"one\ntw");
        h.log(Stream::Stderr, b"err\n");
        h.log(Stream::Stdout, b"o\n");
        assert_eq!(
            h.take_lines(),
            [
                (Stream::Stdout, "one".to_string()),
                (Stream::Stderr, "err".to_string()),
                (Stream::Stdout, "two".to_string())
            ]
        );
    }
}
