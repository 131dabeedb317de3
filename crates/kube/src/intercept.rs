//! The process's clock and entropy, inside a run (DESIGN.md section 11; docs/kube.md
//! "What stays outside"). libc's `clock_gettime`, `gettimeofday`, `time`, `getrandom`
//! and `getentropy` are overridden for the whole binary: while a thread is inside
//! [`enter`], they answer from the process's [`Scope`] (virtual time, a ChaCha8 stream
//! drawn from the seed); anywhere else they forward to the real symbol (`dlsym` with
//! `RTLD_NEXT`). So `Instant`, `SystemTime`, jiff, tokio's timers, std's `HashMap`
//! seeds, `rand`'s thread RNG and uuid follow the seed, without a change to the code
//! that calls them. This is madsim's technique (madsim-rs/madsim, `sim/rand.rs` and
//! `sim/time/system_time.rs`), written anew.
//!
//! `epoll_wait` is overridden too: inside a run it never blocks. It is where tokio's
//! runtime parks when no task can run, and its timeout is the time to the runtime's
//! next timer; [`Scope::take_park`] hands both to the driver ([`crate::driver`]).
//!
//! How the overrides are reached: a call from Rust code (std, the `libc` crate, mio)
//! binds at link time to the definition in the binary, ours. Code that looks the
//! symbol up at run time (`dlsym(RTLD_DEFAULT, "getrandom")`: the getrandom crate,
//! so `rand` and uuid) finds ours only if the binary exports it; [`LINK_ARGS`] are the
//! linker arguments that do, which a binary's build script passes (crates/kube's and
//! the root package's build.rs do).

use rand::{Rng, SeedableRng};
use reconsim_sim::{SimRng, SimTime};
use std::cell::Cell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::task::Waker;

/// Where a run's monotonic clock starts: `Instant::now()` at time 0 reads this much
/// uptime, so code that subtracts an hour from it does not underflow.
pub const MONOTONIC_BASE_SECS: u64 = 1_000_000;

/// The wall-clock instant a run's time 0 stands for, in seconds since 1970: the same
/// epoch as the wire's timestamps (2026-01-01T00:00:00Z; [`crate::wire::timestamp`]),
/// so an object created a moment ago is a moment old to `SystemTime::now()`.
pub const EPOCH_UNIX_SECS: u64 = 1_767_225_600;

/// TAI is ahead of UTC by the leap seconds since 1972 (37 since 2017).
const TAI_OFFSET_SECS: u64 = 37;

/// How many times in a row the runtime may poll without waiting before the driver
/// counts it as busy, and the bridge lets a millisecond pass: a task that only yields
/// never parks, and this bound turns it from a hang into time spent. Virtual time
/// stands still inside a step, so code that spins on the clock until an instant passes
/// (kube-lease-manager sleeps `expiry - now`, zero at the very instant, and looks
/// again) spins until this bound: a real CPU would be past the instant within
/// microseconds. tokio's current-thread runtime polls without waiting once per 61
/// tasks run (`event_interval`) and once per timer round, so 64 in a row is about
/// 3,900 task polls of real work or 64 turns of a spin.
pub const ZERO_POLLS_MAX: u32 = 64;

/// What the linker needs so that run-time look-ups (`dlsym`) find the overrides, for a
/// binary's build script: `cargo:rustc-link-arg=-Wl,--export-dynamic-symbol=getrandom`
/// and so on, one per symbol.
pub const LINK_ARGS: &[&str] = &[
    "-Wl,--export-dynamic-symbol=getrandom",
    "-Wl,--export-dynamic-symbol=getentropy",
    "-Wl,--export-dynamic-symbol=clock_gettime",
    "-Wl,--export-dynamic-symbol=gettimeofday",
];

/// Why the runtime stopped: it waits for a timer, or for nothing it can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Park {
    /// The next timer is due this many milliseconds from now.
    Timer { after_ms: u64 },
    /// No timer: only a message from outside wakes it.
    Idle,
    /// It kept polling without waiting ([`ZERO_POLLS_MAX`] times): a task that never
    /// waits on anything.
    Busy,
}

/// One process's view of the OS inside a run: its clocks and its entropy.
#[derive(Debug)]
pub struct Scope {
    monotonic_ns: u64,
    wall_ns: u64,
    /// Reads of the wall clock at this instant so far: each is a nanosecond after the
    /// one before ([`Scope::read_wall`]).
    wall_reads: u64,
    entropy: SimRng,
    park: Option<Park>,
    zero_polls: u32,
    /// The driver's wake-up, called when the runtime parks.
    waker: Option<Waker>,
}

impl Scope {
    /// A process's scope at time 0, its entropy drawn from `entropy`.
    pub fn new(entropy: SimRng) -> Self {
        let mut s = Scope {
            monotonic_ns: 0,
            wall_ns: 0,
            wall_reads: 0,
            entropy,
            park: None,
            zero_polls: 0,
            waker: None,
        };
        s.set_time(SimTime::ZERO, SimTime::ZERO);
        s
    }

    /// A scope whose entropy is a stream of its own, seeded by one draw of `rng` (the
    /// process's stream), so the program's draws never shift the process's.
    pub fn seeded_by(rng: &mut SimRng) -> Self {
        Scope::new(SimRng::seed_from_u64(rng.next_u64()))
    }

    /// The clocks at this instant: monotonic ones follow true time, wall ones the
    /// process's own clock (with its skew).
    pub fn set_time(&mut self, true_now: SimTime, local_now: SimTime) {
        self.monotonic_ns = (MONOTONIC_BASE_SECS * 1_000 + true_now.as_ms()) * 1_000_000;
        let wall_ns = (EPOCH_UNIX_SECS * 1_000 + local_now.as_ms()) * 1_000_000;
        if wall_ns != self.wall_ns {
            self.wall_reads = 0;
        }
        self.wall_ns = wall_ns;
    }

    /// The wall clock, as one read of it sees it: a nanosecond later than the read
    /// before and than the instant the step stands for. Real time passes between an
    /// event and the code that reads the clock, so a program that slept until an
    /// instant `t` and asks `SystemTime::now() > t` is past it, as on a real machine
    /// (kube-lease-manager's `is_expired` asks exactly that at a lease's expiry). The
    /// monotonic clock stands still within a step: tokio's timers read it, and must
    /// fire at their virtual deadlines, not a tick late.
    fn read_wall(&mut self) -> u64 {
        self.wall_reads += 1;
        self.wall_ns + self.wall_reads
    }

    /// The last park the runtime reported, taken.
    pub fn take_park(&mut self) -> Option<Park> {
        self.zero_polls = 0;
        self.park.take()
    }

    /// Who to wake when the runtime parks.
    pub fn set_waker(&mut self, waker: &Waker) {
        match &self.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.waker = Some(waker.clone()),
        }
    }

    fn parked(&mut self, park: Park) {
        self.park = Some(park);
        if let Some(w) = &self.waker {
            w.wake_by_ref();
        }
    }

    /// Bytes from the process's entropy stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.entropy.fill_bytes(buf);
    }
}

thread_local! {
    static CURRENT: Cell<*mut Scope> = const { Cell::new(std::ptr::null_mut()) };
}

/// Run `f` with this thread's clock and entropy answered by `scope`.
pub fn enter<R>(scope: &mut Scope, f: impl FnOnce() -> R) -> R {
    anchor();
    struct Restore(*mut Scope);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let previous = CURRENT.with(|c| c.replace(scope as *mut Scope));
    let _restore = Restore(previous);
    f()
}

/// Whether this thread is inside a run's scope.
pub fn inside() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// The current scope, for the length of `f`. The pointer was set by [`enter`] from a
/// `&mut Scope` that lives until `enter` returns; `f` never calls back into an
/// override, so no second reference to the scope exists while it runs.
fn with_scope<R>(f: impl FnOnce(&mut Scope) -> R) -> Option<R> {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        return None;
    }
    // SAFETY: see above; the thread-local is per thread, so no other thread sees it.
    Some(f(unsafe { &mut *p }))
}

/// The park the runtime reported in the current scope, or `None` after registering
/// `waker` to be woken when it parks. Outside a scope it is never parked: a step runs
/// only inside one.
pub(crate) fn parked_or_wait(waker: &Waker) -> Option<Park> {
    with_scope(|s| {
        let park = s.park.take();
        if park.is_none() {
            s.set_waker(waker);
        }
        park
    })
    .flatten()
}

/// Keep every override in the binary: a call of [`enter`] references them all, so the
/// linker takes their object file even where nothing else names it first.
#[inline(never)]
fn anchor() {
    std::hint::black_box([
        clock_gettime as *const c_void,
        gettimeofday as *const c_void,
        time as *const c_void,
        getrandom as *const c_void,
        getentropy as *const c_void,
        epoll_wait as *const c_void,
    ]);
}

/// The real symbol `name` (NUL-terminated), looked up once.
fn real(slot: &AtomicPtr<c_void>, name: &'static [u8]) -> *mut c_void {
    let p = slot.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    // SAFETY: `name` is a NUL-terminated symbol name; RTLD_NEXT asks for the next
    // definition after this binary's, libc's.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    assert!(
        !found.is_null(),
        "libc has no {}",
        String::from_utf8_lossy(&name[..name.len() - 1])
    );
    slot.store(found, Ordering::Release);
    found
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// The virtual reading of `clock`, or `None` for a clock this does not know (a
/// dynamic clock of a device), which stays real.
fn virtual_clock(scope: &mut Scope, clock: libc::clockid_t) -> Option<u64> {
    match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
            Some(scope.read_wall())
        }
        libc::CLOCK_TAI => Some(scope.read_wall() + TAI_OFFSET_SECS * 1_000_000_000),
        libc::CLOCK_MONOTONIC
        | libc::CLOCK_MONOTONIC_RAW
        | libc::CLOCK_MONOTONIC_COARSE
        | libc::CLOCK_BOOTTIME
        | libc::CLOCK_BOOTTIME_ALARM
        // CPU time: nothing runs between two instants of a run, so it counts as the
        // monotonic clock does (never backwards, the same on every run).
        | libc::CLOCK_PROCESS_CPUTIME_ID
        | libc::CLOCK_THREAD_CPUTIME_ID => Some(scope.monotonic_ns),
        _ => None,
    }
}

/// `clock_gettime(2)`: the run's clocks inside a scope, the real ones outside.
///
/// # Safety
/// As libc's: `tp` is valid for a write of a `timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_gettime(clock: libc::clockid_t, tp: *mut libc::timespec) -> c_int {
    if let Some(Some(ns)) = with_scope(|s| virtual_clock(s, clock)) {
        if !tp.is_null() {
            // SAFETY: the caller's contract.
            unsafe { tp.write(timespec(ns)) };
        }
        return 0;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int =
        // SAFETY: libc's clock_gettime has this signature.
        unsafe { std::mem::transmute(real(&REAL, b"clock_gettime\0")) };
    // SAFETY: forwarded with the caller's arguments.
    unsafe { f(clock, tp) }
}

/// `gettimeofday(2)`: the run's wall clock inside a scope.
///
/// # Safety
/// As libc's: `tv` is null or valid for a write of a `timeval`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gettimeofday(tv: *mut libc::timeval, tz: *mut c_void) -> c_int {
    if let Some(ns) = with_scope(|s| s.read_wall()) {
        if !tv.is_null() {
            // SAFETY: the caller's contract.
            unsafe {
                tv.write(libc::timeval {
                    tv_sec: (ns / 1_000_000_000) as libc::time_t,
                    tv_usec: ((ns % 1_000_000_000) / 1_000) as libc::suseconds_t,
                })
            };
        }
        return 0;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f: unsafe extern "C" fn(*mut libc::timeval, *mut c_void) -> c_int =
        // SAFETY: libc's gettimeofday has this signature.
        unsafe { std::mem::transmute(real(&REAL, b"gettimeofday\0")) };
    // SAFETY: forwarded with the caller's arguments.
    unsafe { f(tv, tz) }
}

/// `time(2)`: the run's wall clock in seconds inside a scope.
///
/// # Safety
/// As libc's: `t` is null or valid for a write of a `time_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn time(t: *mut libc::time_t) -> libc::time_t {
    if let Some(ns) = with_scope(|s| s.read_wall()) {
        let secs = (ns / 1_000_000_000) as libc::time_t;
        if !t.is_null() {
            // SAFETY: the caller's contract.
            unsafe { t.write(secs) };
        }
        return secs;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f: unsafe extern "C" fn(*mut libc::time_t) -> libc::time_t =
        // SAFETY: libc's time has this signature.
        unsafe { std::mem::transmute(real(&REAL, b"time\0")) };
    // SAFETY: forwarded with the caller's arguments.
    unsafe { f(t) }
}

/// `getrandom(2)`: the process's seeded stream inside a scope (whatever the flags:
/// it never blocks and never fails).
///
/// # Safety
/// As libc's: `buf` is valid for `len` bytes of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: libc::size_t, flags: c_uint) -> isize {
    let filled = with_scope(|s| {
        if len > 0 && !buf.is_null() {
            // SAFETY: the caller's contract.
            s.fill(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) });
        }
    });
    if filled.is_some() {
        return len as isize;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f: unsafe extern "C" fn(*mut c_void, libc::size_t, c_uint) -> isize =
        // SAFETY: libc's getrandom has this signature.
        unsafe { std::mem::transmute(real(&REAL, b"getrandom\0")) };
    // SAFETY: forwarded with the caller's arguments.
    unsafe { f(buf, len, flags) }
}

/// `getentropy(3)`: as [`getrandom`] inside a scope (at most 256 bytes, as libc's).
///
/// # Safety
/// As libc's: `buf` is valid for `len` bytes of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getentropy(buf: *mut c_void, len: libc::size_t) -> c_int {
    if inside() {
        if len > 256 {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = libc::EIO };
            return -1;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { getrandom(buf, len, 0) };
        return 0;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f: unsafe extern "C" fn(*mut c_void, libc::size_t) -> c_int =
        // SAFETY: libc's getentropy has this signature.
        unsafe { std::mem::transmute(real(&REAL, b"getentropy\0")) };
    // SAFETY: forwarded with the caller's arguments.
    unsafe { f(buf, len) }
}

/// `epoll_wait(2)`: inside a scope, no wait and no event. A timeout of 0 is a poll (the
/// runtime checks for I/O between tasks); any other is the runtime parking, reported
/// to the scope with the time to its next timer (-1: none).
///
/// # Safety
/// As libc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout_ms: c_int,
) -> c_int {
    let inside = with_scope(|s| {
        if timeout_ms == 0 {
            s.zero_polls += 1;
            if s.zero_polls >= ZERO_POLLS_MAX {
                s.parked(Park::Busy);
            }
        } else if timeout_ms < 0 {
            s.parked(Park::Idle);
        } else {
            s.parked(Park::Timer {
                after_ms: timeout_ms as u64,
            });
        }
    });
    if inside.is_some() {
        return 0;
    }
    static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f: unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int =
        // SAFETY: libc's epoll_wait has this signature.
        unsafe { std::mem::transmute(real(&REAL, b"epoll_wait\0")) };
    // SAFETY: forwarded with the caller's arguments.
    unsafe { f(epfd, events, max, timeout_ms) }
}

/// Seed this thread's std `HashMap`s from `rng`. std draws a thread's hash keys once,
/// at its first `RandomState`, and counts up from them for every map after; so a
/// run's maps follow the seed only on a thread of its own whose first `RandomState`
/// is made here. Returns false when the thread already had its keys (the maps then
/// follow the thread's history, not the seed).
pub fn seed_std_hashmaps(rng: &mut SimRng) -> bool {
    let mut scope = Scope::seeded_by(rng);
    let before = scope.entropy.clone();
    enter(&mut scope, || {
        let _ = std::collections::hash_map::RandomState::new();
    });
    // std drew its keys through `getrandom` here exactly when the stream moved.
    scope.entropy.get_word_pos() != before.get_word_pos()
}

/// Run `f` on a thread of its own whose per-thread generators are seeded by `seed`:
/// std's `HashMap` keys ([`seed_std_hashmaps`]) and fastrand's thread generator (which
/// it otherwise seeds from the thread's id, a count of the process's threads; backon's
/// jitter in kube-runtime's watcher backoff draws from it). How a run with real code
/// is deterministic in these too, whatever ran in the process before. The thread is
/// the run's container, made before the run and joined after it; nothing inside the
/// run is concurrent.
pub fn on_own_thread<R: Send>(seed: u64, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(format!("reconsim-run-{seed}"))
            .spawn_scoped(s, move || {
                let mut rng = reconsim_sim::Streams::new(seed).stream("std-hashmap-keys");
                let seeded = seed_std_hashmaps(&mut rng);
                debug_assert!(seeded, "a new thread has no hash keys yet");
                fastrand::seed(rng.next_u64());
                f()
            })
            .expect("a thread for the run starts")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The run host real code needs (`reconsim_family::RunHost`; `Extensions::host`):
/// each run on a thread of its own, seeded ([`on_own_thread`]).
pub fn host(seed: u64, run: &mut (dyn FnMut() + Send)) {
    on_own_thread(seed, run);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_scripts_export_every_symbol_of_link_args() {
        for script in [
            include_str!("../build.rs"),
            include_str!("../../cli/build.rs"),
        ] {
            for arg in LINK_ARGS {
                let symbol = arg.rsplit('=').next().expect("an = in each");
                assert!(script.contains(&format!("\"{symbol}\"")), "{symbol}");
            }
        }
    }

    #[test]
    fn a_scope_answers_inside_and_the_real_clock_outside() {
        let mut scope = Scope::new(SimRng::seed_from_u64(1));
        scope.set_time(SimTime(1_500), SimTime(2_000));
        let (mono, wall) = enter(&mut scope, || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec.
            unsafe { clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            (ts, wall)
        });
        assert_eq!(
            (mono.tv_sec, mono.tv_nsec),
            ((MONOTONIC_BASE_SECS + 1) as libc::time_t, 500_000_000)
        );
        assert_eq!(wall.as_millis(), u128::from(EPOCH_UNIX_SECS) * 1000 + 2_000);
        // Each read of the wall clock is a nanosecond after the one before, and the
        // first after the instant itself; the monotonic clock stands still.
        let (a, b, m1, m2) = enter(&mut scope, || {
            let a = std::time::SystemTime::now();
            let b = std::time::SystemTime::now();
            (a, b, std::time::Instant::now(), std::time::Instant::now())
        });
        let at = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(EPOCH_UNIX_SECS * 1000 + 2_000);
        assert!(at < a && a < b, "{at:?} {a:?} {b:?}");
        assert_eq!(b.duration_since(a).unwrap().as_nanos(), 1);
        assert_eq!(m1, m2);
        // A new instant starts the count again.
        scope.set_time(SimTime(1_501), SimTime(2_001));
        let c = enter(&mut scope, std::time::SystemTime::now);
        assert_eq!(
            c.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos(),
            (u128::from(EPOCH_UNIX_SECS) * 1000 + 2_001) * 1_000_000 + 1
        );
        assert!(!inside());
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        assert!(real.as_secs() > EPOCH_UNIX_SECS + 86_400);
    }
}
