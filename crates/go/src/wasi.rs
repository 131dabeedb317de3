//! WASI preview 1, answered by the run: the imports a Go program built with
//! `GOOS=wasip1` makes (`runtime/os_wasip1.go`, `runtime/netpoll_wasip1.go`,
//! `syscall/fs_wasip1.go`, `syscall/net_wasip1.go`), plus `reconsim.dial`, the
//! outbound connection the Go toolchain lacks on wasip1 (docs/go.md). Every answer is
//! a function of the program's [`Host`]: clocks of the run, entropy of the seed,
//! files in memory, sockets whose bytes travel as the network's messages.
//!
//! Layouts are WASI preview 1's (`wasi_snapshot_preview1.witx`): a subscription is 48
//! bytes, an event 32, an iovec 8, fdstat 24, filestat 64, a dirent 24 and its name.
//! Any other import of `wasi_snapshot_preview1` answers ENOSYS, as a runtime without
//! it would.

use crate::files::{self, Entry};
use crate::host::{Fd, Host, Stream, Wait, errno};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use wasmtime::{Caller, Extern, Linker, Memory, Module, Val};

/// The store's data: the program's world, shared with the bridge that steps it.
pub struct Guest {
    pub host: Arc<Mutex<Host>>,
    pub memory: Option<Memory>,
}

/// The program called `proc_exit`: its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcExit(pub i32);

impl std::fmt::Display for ProcExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for ProcExit {}

const WASI: &str = "wasi_snapshot_preview1";

/// The WASI functions answered here; any other the module imports answers ENOSYS.
const SERVED: &[&str] = &[
    "args_sizes_get",
    "args_get",
    "environ_sizes_get",
    "environ_get",
    "clock_time_get",
    "clock_res_get",
    "random_get",
    "sched_yield",
    "proc_exit",
    "fd_write",
    "fd_read",
    "fd_pread",
    "fd_pwrite",
    "fd_close",
    "fd_fdstat_get",
    "fd_fdstat_set_flags",
    "fd_fdstat_set_rights",
    "fd_filestat_get",
    "fd_filestat_set_size",
    "fd_sync",
    "fd_prestat_get",
    "fd_prestat_dir_name",
    "fd_seek",
    "fd_readdir",
    "path_open",
    "path_filestat_get",
    "path_readlink",
    "sock_shutdown",
    "poll_oneoff",
];

/// Filetypes.
const FILETYPE_CHARACTER_DEVICE: u8 = 2;
const FILETYPE_DIRECTORY: u8 = 3;
const FILETYPE_REGULAR_FILE: u8 = 4;
const FILETYPE_SOCKET_STREAM: u8 = 6;
/// Event types and flags of `poll_oneoff`.
const EVENTTYPE_CLOCK: u8 = 0;
const EVENTTYPE_FD_READ: u8 = 1;
const EVENTTYPE_FD_WRITE: u8 = 2;
const EVENT_FD_READWRITE_HANGUP: u16 = 1;
const FDFLAG_NONBLOCK: u16 = 4;
const SUBCLOCKFLAG_ABSTIME: u16 = 1;

type R = wasmtime::Result<i32>;

fn mem<'a>(caller: &'a mut Caller<'_, Guest>) -> (&'a mut [u8], &'a mut Guest) {
    let memory = caller
        .data()
        .memory
        .expect("the memory is set before the program starts");
    memory.data_and_store_mut(caller)
}

/// A call that reads or writes the guest's memory and its host: its errno.
fn with_host(
    c: &mut Caller<'_, Guest>,
    f: impl FnOnce(&mut [u8], &mut Host) -> Result<(), i32>,
) -> R {
    let (m, g) = mem(c);
    let mut h = g.host.lock().expect("the host's lock");
    code(f(m, &mut h))
}

fn slice(m: &[u8], ptr: i32, len: u32) -> Result<&[u8], i32> {
    let start = ptr as u32 as usize;
    m.get(start..start + len as usize).ok_or(errno::FAULT)
}

fn slice_mut(m: &mut [u8], ptr: i32, len: u32) -> Result<&mut [u8], i32> {
    let start = ptr as u32 as usize;
    m.get_mut(start..start + len as usize).ok_or(errno::FAULT)
}

fn get_u32(m: &[u8], ptr: u32) -> Result<u32, i32> {
    let b = slice(m, ptr as i32, 4)?;
    Ok(u32::from_le_bytes(b.try_into().expect("four bytes")))
}

fn get_u64(m: &[u8], ptr: u32) -> Result<u64, i32> {
    let b = slice(m, ptr as i32, 8)?;
    Ok(u64::from_le_bytes(b.try_into().expect("eight bytes")))
}

fn put(m: &mut [u8], ptr: u32, bytes: &[u8]) -> Result<(), i32> {
    slice_mut(m, ptr as i32, bytes.len() as u32)?.copy_from_slice(bytes);
    Ok(())
}

fn put_u32(m: &mut [u8], ptr: i32, v: u32) -> Result<(), i32> {
    put(m, ptr as u32, &v.to_le_bytes())
}

fn put_u64(m: &mut [u8], ptr: i32, v: u64) -> Result<(), i32> {
    put(m, ptr as u32, &v.to_le_bytes())
}

/// An errno from an answer.
fn code(r: Result<(), i32>) -> R {
    Ok(r.err().unwrap_or(errno::SUCCESS))
}

/// The iovecs at `iovs` (`len` of them): (pointer, length) pairs.
fn iovecs(m: &[u8], iovs: i32, len: i32) -> Result<Vec<(u32, u32)>, i32> {
    (0..len as u32)
        .map(|i| {
            let at = iovs as u32 + i * 8;
            Ok((get_u32(m, at)?, get_u32(m, at + 4)?))
        })
        .collect()
}

/// Strings laid out as argv or environ: pointers at `ptrs`, NUL-ended bytes at `buf`.
fn put_strings(m: &mut [u8], list: &[String], ptrs: i32, buf: i32) -> Result<(), i32> {
    let mut at = buf as u32;
    for (i, s) in list.iter().enumerate() {
        put_u32(m, ptrs + 4 * i as i32, at)?;
        put(m, at, s.as_bytes())?;
        put(m, at + s.len() as u32, &[0])?;
        at += s.len() as u32 + 1;
    }
    Ok(())
}

fn sizes(m: &mut [u8], list: &[String], count: i32, size: i32) -> Result<(), i32> {
    put_u32(m, count, list.len() as u32)?;
    put_u32(m, size, list.iter().map(|s| s.len() as u32 + 1).sum())
}

fn write_fd(host: &mut Host, fd: u32, data: &[u8]) -> Result<u32, i32> {
    match host.fds.get(&fd) {
        Some(Fd::Stdout) => host.log(Stream::Stdout, data),
        Some(Fd::Stderr) => host.log(Stream::Stderr, data),
        Some(Fd::Socket(id)) => {
            let s = host.sockets.get_mut(id).ok_or(errno::BADF)?;
            if s.reset {
                return Err(errno::CONNRESET);
            }
            if s.write_shut || s.closed {
                return Err(errno::PIPE);
            }
            s.tx.extend_from_slice(data);
        }
        Some(Fd::Stdin | Fd::File { .. }) => return Err(errno::BADF),
        Some(Fd::Dir(_)) => return Err(errno::ISDIR),
        None => return Err(errno::BADF),
    }
    Ok(data.len() as u32)
}

/// Reads into `bufs`, in order, from the descriptor; `at` reads a file from an offset
/// without moving it (`fd_pread`).
fn read_fd(
    host: &mut Host,
    fd: u32,
    m: &mut [u8],
    bufs: &[(u32, u32)],
    at: Option<u64>,
) -> Result<u32, i32> {
    let mut n = 0u32;
    match host.fds.get_mut(&fd).ok_or(errno::BADF)? {
        Fd::Stdin => {}
        Fd::Stdout | Fd::Stderr => return Err(errno::BADF),
        Fd::Dir(_) => return Err(errno::ISDIR),
        Fd::File { data, pos } => {
            let mut off = at.unwrap_or(*pos) as usize;
            for &(ptr, len) in bufs {
                let rest = data.get(off..).unwrap_or(&[]);
                let k = rest.len().min(len as usize);
                put(m, ptr, &rest[..k])?;
                off += k;
                n += k as u32;
                if k < len as usize {
                    break;
                }
            }
            if at.is_none() {
                *pos = off as u64;
            }
        }
        Fd::Socket(id) => {
            let s = host.sockets.get_mut(id).ok_or(errno::BADF)?;
            if s.reset {
                return Err(errno::CONNRESET);
            }
            if s.rx.is_empty() {
                return if s.eof { Ok(0) } else { Err(errno::AGAIN) };
            }
            for &(ptr, len) in bufs {
                let k = s.rx.len().min(len as usize);
                let out = slice_mut(m, ptr as i32, k as u32)?;
                for (o, b) in out.iter_mut().zip(s.rx.drain(..k)) {
                    *o = b;
                }
                n += k as u32;
                if s.rx.is_empty() {
                    break;
                }
            }
        }
    }
    Ok(n)
}

fn fdstat(host: &Host, fd: u32) -> Result<[u8; 24], i32> {
    let (filetype, flags) = match host.fds.get(&fd).ok_or(errno::BADF)? {
        Fd::Stdin | Fd::Stdout | Fd::Stderr => (FILETYPE_CHARACTER_DEVICE, 0),
        Fd::Dir(_) => (FILETYPE_DIRECTORY, 0),
        Fd::File { .. } => (FILETYPE_REGULAR_FILE, 0),
        Fd::Socket(_) => (FILETYPE_SOCKET_STREAM, FDFLAG_NONBLOCK),
    };
    let mut b = [0u8; 24];
    b[0] = filetype;
    b[2..4].copy_from_slice(&flags.to_le_bytes());
    // Every right, base and inheriting: the tree is read-only by its own answers.
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    Ok(b)
}

/// A filestat for an entry: its type and size, inode numbered by its path's place.
fn filestat(filetype: u8, size: u64, ino: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[8..16].copy_from_slice(&ino.to_le_bytes());
    b[16] = filetype;
    b[24..32].copy_from_slice(&1u64.to_le_bytes());
    b[32..40].copy_from_slice(&size.to_le_bytes());
    b
}

fn entry_stat(path: &str, e: &Entry) -> [u8; 64] {
    let ino = path.bytes().fold(1469598103934665603u64, |h, b| {
        (h ^ b as u64).wrapping_mul(1099511628211)
    });
    match e {
        Entry::Dir => filestat(FILETYPE_DIRECTORY, 0, ino),
        Entry::File(d) => filestat(FILETYPE_REGULAR_FILE, d.len() as u64, ino),
    }
}

fn dir_of(host: &Host, fd: u32) -> Result<String, i32> {
    match host.fds.get(&fd).ok_or(errno::BADF)? {
        Fd::Dir(p) => Ok(p.clone()),
        _ => Err(errno::NOTDIR),
    }
}

fn path_arg(m: &[u8], ptr: i32, len: i32) -> Result<String, i32> {
    let b = slice(m, ptr, len as u32)?;
    std::str::from_utf8(b)
        .map(str::to_string)
        .map_err(|_| errno::INVAL)
}

/// One subscription of `poll_oneoff`, read.
#[derive(Debug, Clone, Copy)]
enum Sub {
    Clock {
        userdata: u64,
        timeout: u64,
        abs: bool,
    },
    Read {
        userdata: u64,
        fd: u32,
    },
    Write {
        userdata: u64,
        fd: u32,
    },
}

fn subscriptions(m: &[u8], ptr: i32, n: i32) -> Result<Vec<Sub>, i32> {
    (0..n as u32)
        .map(|i| {
            let at = ptr as u32 + i * 48;
            let userdata = get_u64(m, at)?;
            let tag = slice(m, (at + 8) as i32, 1)?[0];
            Ok(match tag {
                EVENTTYPE_CLOCK => {
                    let timeout = get_u64(m, at + 24)?;
                    let flags = u16::from_le_bytes(
                        slice(m, (at + 40) as i32, 2)?
                            .try_into()
                            .expect("two bytes"),
                    );
                    Sub::Clock {
                        userdata,
                        timeout,
                        abs: flags & SUBCLOCKFLAG_ABSTIME != 0,
                    }
                }
                EVENTTYPE_FD_READ => Sub::Read {
                    userdata,
                    fd: get_u32(m, at + 16)?,
                },
                EVENTTYPE_FD_WRITE => Sub::Write {
                    userdata,
                    fd: get_u32(m, at + 16)?,
                },
                _ => return Err(errno::INVAL),
            })
        })
        .collect()
}

/// An event of `poll_oneoff`: (userdata, errno, type, nbytes, flags).
type Event = (u64, u16, u8, u64, u16);

/// The subscriptions that are ready now, given each clock's deadline.
fn ready(host: &Host, subs: &[(Sub, Option<u64>)]) -> Vec<Event> {
    let now = host.monotonic_ns();
    let mut out = Vec::new();
    for &(sub, deadline) in subs {
        match sub {
            Sub::Clock { userdata, .. } => {
                if deadline.is_some_and(|d| now >= d) {
                    out.push((userdata, 0, EVENTTYPE_CLOCK, 0, 0));
                }
            }
            Sub::Read { userdata, fd } => match host.fds.get(&fd) {
                Some(Fd::Socket(id)) => match host.sockets.get(id) {
                    Some(s) if s.reset => {
                        out.push((userdata, errno::CONNRESET as u16, EVENTTYPE_FD_READ, 0, 0))
                    }
                    Some(s) if !s.rx.is_empty() => {
                        out.push((userdata, 0, EVENTTYPE_FD_READ, s.rx.len() as u64, 0))
                    }
                    Some(s) if s.eof => {
                        out.push((userdata, 0, EVENTTYPE_FD_READ, 0, EVENT_FD_READWRITE_HANGUP))
                    }
                    Some(_) => {}
                    None => out.push((userdata, errno::BADF as u16, EVENTTYPE_FD_READ, 0, 0)),
                },
                Some(Fd::Stdin) => {
                    out.push((userdata, 0, EVENTTYPE_FD_READ, 0, EVENT_FD_READWRITE_HANGUP))
                }
                Some(_) => out.push((userdata, 0, EVENTTYPE_FD_READ, 0, 0)),
                None => out.push((userdata, errno::BADF as u16, EVENTTYPE_FD_READ, 0, 0)),
            },
            Sub::Write { userdata, fd } => match host.fds.get(&fd) {
                Some(Fd::Socket(id)) => match host.sockets.get(id) {
                    Some(s) if s.reset => {
                        out.push((userdata, errno::CONNRESET as u16, EVENTTYPE_FD_WRITE, 0, 0))
                    }
                    Some(_) => out.push((userdata, 0, EVENTTYPE_FD_WRITE, 64 * 1024, 0)),
                    None => out.push((userdata, errno::BADF as u16, EVENTTYPE_FD_WRITE, 0, 0)),
                },
                Some(_) => out.push((userdata, 0, EVENTTYPE_FD_WRITE, 0, 0)),
                None => out.push((userdata, errno::BADF as u16, EVENTTYPE_FD_WRITE, 0, 0)),
            },
        }
    }
    out
}

fn put_events(m: &mut [u8], out: i32, events: &[Event], nevents: i32) -> Result<(), i32> {
    for (i, &(userdata, err, typ, nbytes, flags)) in events.iter().enumerate() {
        let at = out as u32 + 32 * i as u32;
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&userdata.to_le_bytes());
        b[8..10].copy_from_slice(&err.to_le_bytes());
        b[10] = typ;
        b[16..24].copy_from_slice(&nbytes.to_le_bytes());
        b[24..26].copy_from_slice(&flags.to_le_bytes());
        put(m, at, &b)?;
    }
    put_u32(m, nevents, events.len() as u32)
}

/// `poll_oneoff`: the events that are ready, or, when none is, a wait the bridge
/// answers (the future stays pending, the guest's fiber suspended, until a later step
/// finds a socket readable or the clock past the deadline). A clock subscription's
/// deadline is fixed at the call, on the monotonic clock.
fn poll_oneoff(
    mut caller: Caller<'_, Guest>,
    (subs_ptr, out, n, nevents): (i32, i32, i32, i32),
) -> Box<dyn Future<Output = R> + Send + '_> {
    Box::new(async move {
        let (subs, host) = {
            let (m, g) = mem(&mut caller);
            let subs = match subscriptions(m, subs_ptr, n) {
                Ok(s) => s,
                Err(e) => return Ok(e),
            };
            (subs, g.host.clone())
        };
        if subs.is_empty() {
            return Ok(errno::INVAL);
        }
        let timed: Vec<(Sub, Option<u64>)> = {
            let h = host.lock().expect("the host's lock");
            let now = h.monotonic_ns();
            subs.iter()
                .map(|&s| match s {
                    Sub::Clock { timeout, abs, .. } => {
                        let d = if abs {
                            timeout
                        } else {
                            now.saturating_add(timeout)
                        };
                        (s, Some(d))
                    }
                    s => (s, None),
                })
                .collect()
        };
        let deadline_ns = timed.iter().filter_map(|(_, d)| *d).min();
        let events = std::future::poll_fn(|_| {
            let mut h = host.lock().expect("the host's lock");
            let events = ready(&h, &timed);
            if events.is_empty() {
                h.wait = Some(Wait { deadline_ns });
                Poll::Pending
            } else {
                h.wait = None;
                h.yields = 0;
                Poll::Ready(events)
            }
        })
        .await;
        let (m, _) = mem(&mut caller);
        code(put_events(m, out, &events, nevents))
    })
}

/// Adds the imports to `linker`: the WASI functions a Go program uses, `reconsim.dial`,
/// and ENOSYS for any other WASI import `module` names.
pub fn add_to_linker(linker: &mut Linker<Guest>, module: &Module) -> wasmtime::Result<()> {
    linker.func_wrap(
        WASI,
        "args_sizes_get",
        |mut c: Caller<'_, Guest>, count: i32, size: i32| -> R {
            with_host(&mut c, |m, h| sizes(m, &h.args, count, size))
        },
    )?;
    linker.func_wrap(
        WASI,
        "args_get",
        |mut c: Caller<'_, Guest>, ptrs: i32, buf: i32| -> R {
            with_host(&mut c, |m, h| put_strings(m, &h.args, ptrs, buf))
        },
    )?;
    linker.func_wrap(
        WASI,
        "environ_sizes_get",
        |mut c: Caller<'_, Guest>, count: i32, size: i32| -> R {
            with_host(&mut c, |m, h| sizes(m, &h.env, count, size))
        },
    )?;
    linker.func_wrap(
        WASI,
        "environ_get",
        |mut c: Caller<'_, Guest>, ptrs: i32, buf: i32| -> R {
            with_host(&mut c, |m, h| put_strings(m, &h.env, ptrs, buf))
        },
    )?;
    linker.func_wrap(
        WASI,
        "clock_time_get",
        |mut c: Caller<'_, Guest>, id: i32, _precision: i64, at: i32| -> R {
            with_host(&mut c, |m, h| {
                let t = match id {
                    0 => h.read_wall_ns(),
                    1..=3 => h.monotonic_ns(),
                    _ => return Err(errno::INVAL),
                };
                put_u64(m, at, t)
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "clock_res_get",
        |mut c: Caller<'_, Guest>, _id: i32, at: i32| -> R {
            let (m, _) = mem(&mut c);
            code(put_u64(m, at, 1_000))
        },
    )?;
    linker.func_wrap(
        WASI,
        "random_get",
        |mut c: Caller<'_, Guest>, buf: i32, len: i32| -> R {
            with_host(&mut c, |m, h| {
                h.fill(slice_mut(m, buf, len as u32)?);
                Ok(())
            })
        },
    )?;
    linker.func_wrap(WASI, "sched_yield", |c: Caller<'_, Guest>| -> R {
        c.data().host.lock().expect("the host's lock").yields += 1;
        Ok(errno::SUCCESS)
    })?;
    linker.func_wrap(
        WASI,
        "proc_exit",
        |_c: Caller<'_, Guest>, status: i32| -> wasmtime::Result<()> {
            Err(wasmtime::Error::new(ProcExit(status)))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_write",
        |mut c: Caller<'_, Guest>, fd: i32, iovs: i32, len: i32, nwritten: i32| -> R {
            with_host(&mut c, |m, h| {
                let mut n = 0u32;
                for (ptr, l) in iovecs(m, iovs, len)? {
                    n += write_fd(h, fd as u32, slice(m, ptr as i32, l)?)?;
                }
                put_u32(m, nwritten, n)
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_read",
        |mut c: Caller<'_, Guest>, fd: i32, iovs: i32, len: i32, nread: i32| -> R {
            with_host(&mut c, |m, h| {
                let bufs = iovecs(m, iovs, len)?;
                let n = read_fd(h, fd as u32, m, &bufs, None)?;
                put_u32(m, nread, n)
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_pread",
        |mut c: Caller<'_, Guest>, fd: i32, iovs: i32, len: i32, offset: i64, nread: i32| -> R {
            with_host(&mut c, |m, h| {
                if matches!(h.fds.get(&(fd as u32)), Some(Fd::Socket(_))) {
                    return Err(errno::SPIPE);
                }
                let bufs = iovecs(m, iovs, len)?;
                let n = read_fd(h, fd as u32, m, &bufs, Some(offset as u64))?;
                put_u32(m, nread, n)
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_pwrite",
        |_c: Caller<'_, Guest>, _fd: i32, _iovs: i32, _len: i32, _offset: i64, _n: i32| -> R {
            Ok(errno::ROFS)
        },
    )?;
    linker.func_wrap(WASI, "fd_close", |c: Caller<'_, Guest>, fd: i32| -> R {
        let mut h = c.data().host.lock().expect("the host's lock");
        match h.fds.remove(&(fd as u32)) {
            Some(Fd::Socket(id)) => {
                if let Some(s) = h.sockets.get_mut(&id) {
                    s.closed = true;
                }
                Ok(errno::SUCCESS)
            }
            Some(_) => Ok(errno::SUCCESS),
            None => Ok(errno::BADF),
        }
    })?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_get",
        |mut c: Caller<'_, Guest>, fd: i32, at: i32| -> R {
            with_host(&mut c, |m, h| {
                fdstat(h, fd as u32).and_then(|b| put(m, at as u32, &b))
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_flags",
        |c: Caller<'_, Guest>, fd: i32, _flags: i32| -> R {
            let h = c.data().host.lock().expect("the host's lock");
            Ok(if h.fds.contains_key(&(fd as u32)) {
                errno::SUCCESS
            } else {
                errno::BADF
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_rights",
        |c: Caller<'_, Guest>, fd: i32, _base: i64, _inh: i64| -> R {
            let h = c.data().host.lock().expect("the host's lock");
            Ok(if h.fds.contains_key(&(fd as u32)) {
                errno::SUCCESS
            } else {
                errno::BADF
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_filestat_get",
        |mut c: Caller<'_, Guest>, fd: i32, at: i32| -> R {
            let (m, g) = mem(&mut c);
            let h = g.host.lock().expect("the host's lock");
            let b = match h.fds.get(&(fd as u32)) {
                None => return Ok(errno::BADF),
                Some(Fd::Stdin | Fd::Stdout | Fd::Stderr) => {
                    filestat(FILETYPE_CHARACTER_DEVICE, 0, fd as u64)
                }
                Some(Fd::Socket(_)) => filestat(FILETYPE_SOCKET_STREAM, 0, fd as u64),
                Some(Fd::Dir(p)) => entry_stat(p, &Entry::Dir),
                Some(Fd::File { data, .. }) => {
                    filestat(FILETYPE_REGULAR_FILE, data.len() as u64, fd as u64)
                }
            };
            code(put(m, at as u32, &b))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_filestat_set_size",
        |_c: Caller<'_, Guest>, _fd: i32, _size: i64| -> R { Ok(errno::ROFS) },
    )?;
    linker.func_wrap(WASI, "fd_sync", |_c: Caller<'_, Guest>, _fd: i32| -> R {
        Ok(errno::SUCCESS)
    })?;
    linker.func_wrap(
        WASI,
        "fd_prestat_get",
        |mut c: Caller<'_, Guest>, fd: i32, at: i32| -> R {
            if fd != 3 {
                return Ok(errno::BADF);
            }
            let (m, _) = mem(&mut c);
            // A directory (tag 0) whose name is "/" (one byte).
            code(put(m, at as u32, &[0, 0, 0, 0, 1, 0, 0, 0]))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_prestat_dir_name",
        |mut c: Caller<'_, Guest>, fd: i32, at: i32, len: i32| -> R {
            if fd != 3 {
                return Ok(errno::BADF);
            }
            if len < 1 {
                return Ok(errno::INVAL);
            }
            let (m, _) = mem(&mut c);
            code(put(m, at as u32, b"/"))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_seek",
        |mut c: Caller<'_, Guest>, fd: i32, offset: i64, whence: i32, at: i32| -> R {
            let (m, g) = mem(&mut c);
            let mut h = g.host.lock().expect("the host's lock");
            let r = match h.fds.get_mut(&(fd as u32)) {
                Some(Fd::File { data, pos }) => {
                    let base = match whence {
                        0 => 0i64,
                        1 => *pos as i64,
                        2 => data.len() as i64,
                        _ => return Ok(errno::INVAL),
                    };
                    let to = base
                        .checked_add(offset)
                        .filter(|t| *t >= 0)
                        .ok_or(errno::INVAL);
                    to.and_then(|to| {
                        *pos = to as u64;
                        put_u64(m, at, to as u64)
                    })
                }
                Some(Fd::Dir(_)) => Err(errno::ISDIR),
                Some(_) => Err(errno::SPIPE),
                None => Err(errno::BADF),
            };
            code(r)
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_readdir",
        |mut c: Caller<'_, Guest>, fd: i32, buf: i32, len: i32, cookie: i64, used: i32| -> R {
            with_host(&mut c, |m, h| {
                let dir = dir_of(h, fd as u32)?;
                let mut out = Vec::new();
                let mut entries = vec![(".".to_string(), true), ("..".to_string(), true)];
                entries.extend(h.files.list(&dir));
                for (i, (name, is_dir)) in entries.iter().enumerate().skip(cookie as usize) {
                    out.extend_from_slice(&(i as u64 + 1).to_le_bytes());
                    out.extend_from_slice(&(i as u64 + 1).to_le_bytes());
                    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
                    out.push(if *is_dir {
                        FILETYPE_DIRECTORY
                    } else {
                        FILETYPE_REGULAR_FILE
                    });
                    out.extend_from_slice(&[0, 0, 0]);
                    out.extend_from_slice(name.as_bytes());
                }
                let k = out.len().min(len as usize);
                put(m, buf as u32, &out[..k])?;
                put_u32(m, used, k as u32)
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_open",
        |mut c: Caller<'_, Guest>,
         dirfd: i32,
         _dirflags: i32,
         path: i32,
         path_len: i32,
         oflags: i32,
         _base: i64,
         _inh: i64,
         _fdflags: i32,
         at: i32|
         -> R {
            with_host(&mut c, |m, h| {
                let dir = dir_of(h, dirfd as u32)?;
                let full = files::join(&dir, &path_arg(m, path, path_len)?);
                // O_CREAT, O_EXCL or O_TRUNC ask to write: the tree is read-only.
                let writes = oflags & (0x1 | 0x4 | 0x8) != 0;
                let fd = match h.files.lookup(&full) {
                    None if writes => return Err(errno::ROFS),
                    None => return Err(errno::NOENT),
                    Some(_) if writes => return Err(errno::ROFS),
                    Some(Entry::Dir) => h.open(Fd::Dir(full)),
                    Some(Entry::File(_)) if oflags & 0x2 != 0 => return Err(errno::NOTDIR),
                    Some(Entry::File(data)) => h.open(Fd::File { data, pos: 0 }),
                };
                put_u32(m, at, fd)
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_filestat_get",
        |mut c: Caller<'_, Guest>,
         dirfd: i32,
         _flags: i32,
         path: i32,
         path_len: i32,
         at: i32|
         -> R {
            with_host(&mut c, |m, h| {
                let dir = dir_of(h, dirfd as u32)?;
                let full = files::join(&dir, &path_arg(m, path, path_len)?);
                let e = h.files.lookup(&full).ok_or(errno::NOENT)?;
                put(m, at as u32, &entry_stat(&full, &e))
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_readlink",
        |mut c: Caller<'_, Guest>,
         dirfd: i32,
         path: i32,
         path_len: i32,
         _buf: i32,
         _len: i32,
         _used: i32|
         -> R {
            with_host(&mut c, |m, h| {
                let dir = dir_of(h, dirfd as u32)?;
                let full = files::join(&dir, &path_arg(m, path, path_len)?);
                // Nothing in the tree is a link.
                h.files
                    .lookup(&full)
                    .map_or(Err(errno::NOENT), |_| Err(errno::INVAL))
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "sock_shutdown",
        |c: Caller<'_, Guest>, fd: i32, how: i32| -> R {
            let mut h = c.data().host.lock().expect("the host's lock");
            let Some(Fd::Socket(id)) = h.fds.get(&(fd as u32)).cloned() else {
                return Ok(errno::NOTCONN);
            };
            if let Some(s) = h.sockets.get_mut(&id)
                && how & 2 != 0
            {
                s.write_shut = true;
            }
            Ok(errno::SUCCESS)
        },
    )?;
    linker.func_wrap(
        "reconsim",
        "dial",
        |mut c: Caller<'_, Guest>, addr: i32, len: i32, at: i32| -> R {
            with_host(&mut c, |m, h| {
                let addr = path_arg(m, addr, len)?;
                let fd = h.dial(&addr)?;
                put_u32(m, at, fd)
            })
        },
    )?;
    linker.func_wrap_async(WASI, "poll_oneoff", poll_oneoff)?;
    // What else the program imports from WASI: ENOSYS (or a trap, for a function
    // that returns no errno), as a runtime without it answers.
    for import in module.imports() {
        if import.module() != WASI || SERVED.contains(&import.name()) {
            continue;
        }
        let Some(ty) = import.ty().func().cloned() else {
            continue;
        };
        let name = import.name().to_string();
        let returns_errno = ty.results().len() == 1;
        linker.func_new(
            WASI,
            &name.clone(),
            ty,
            move |_c, _args, results: &mut [Val]| {
                if returns_errno {
                    results[0] = Val::I32(errno::NOSYS);
                    Ok(())
                } else {
                    Err(wasmtime::Error::msg(format!(
                        "{name} is not served to Go programs"
                    )))
                }
            },
        )?;
    }
    Ok(())
}

/// The module's memory, found once the instance exists.
pub fn memory_of(
    instance: &wasmtime::Instance,
    store: &mut wasmtime::Store<Guest>,
) -> Option<Memory> {
    match instance.get_export(&mut *store, "memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    }
}
