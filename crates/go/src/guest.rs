//! A Go program as a wasmtime guest: compiled once per binary (in this process, and
//! on disk across processes), instantiated at each start of its process, and resumed
//! by the bridge until it waits.
//!
//! The guest runs on a fiber (wasmtime's async support): when `poll_oneoff` finds
//! nothing ready, its host future is pending, the fiber suspends, and [`Running::resume`]
//! returns [`Stop::Waiting`]. The next resume, after the bridge has set the clocks and
//! handed the sockets their bytes, polls the same future again. No thread, no waker:
//! the future is polled with a no-op waker, only from the bridge's handler.
//!
//! Determinism: Cranelift canonicalizes NaNs; fuel bounds a guest that never waits
//! (it yields every [`FUEL_SLICE`] units, and a step that takes more than
//! [`SLICES_PER_STEP_MAX`] slices is a livelock, the same on every run); no epoch
//! interruption (its trap point would follow wall time).

use crate::files::Files;
use crate::host::{Host, Wait};
use crate::snapshot::{self, Snapshot};
use crate::wasi::{self, Guest, ProcExit};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use wasmtime::{Config, Engine, InstancePre, Linker, Module, Store};

/// Fuel a guest burns between two yields to the bridge.
pub const FUEL_SLICE: u64 = 10_000_000;
/// Slices a guest may run without waiting within one step: about 2 x 10^10 fuel (wasm
/// instructions, roughly), far past a Go program's start-up. More is a loop that
/// never waits, reported as such.
pub const SLICES_PER_STEP_MAX: u64 = 2_000;

/// Why a Go program could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    Compile {
        path: PathBuf,
        error: String,
    },
    NotWasip1 {
        path: PathBuf,
        why: String,
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Read { path, error } => {
                write!(f, "{}: cannot read: {error}", path.display())
            }
            LoadError::Compile { path, error } => write!(
                f,
                "{}: not a WebAssembly module wasmtime can compile: {error}",
                path.display()
            ),
            LoadError::NotWasip1 { path, why } => write!(
                f,
                "{}: not a Go program built with GOOS=wasip1 GOARCH=wasm: {why}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// The one engine every Go program of this process compiles and runs on.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut c = Config::new();
        c.async_support(true);
        c.consume_fuel(true);
        c.cranelift_nan_canonicalization(true);
        // Go grows its goroutine stacks in linear memory; the wasm stack holds only
        // the scheduler's and a call chain's frames.
        c.max_wasm_stack(8 << 20);
        c.async_stack_size(16 << 20);
        Engine::new(&c).expect("the engine's configuration is valid")
    })
}

/// A compiled Go program, ready to start: its module linked with the run's imports.
#[derive(Clone)]
pub struct Program {
    pub sha256: [u8; 32],
    pub path: PathBuf,
    pre: InstancePre<Guest>,
    /// For a program built for snapshots (`_initialize` and `reconsim_main`): its
    /// globals' count, and its snapshots by the inputs of initialisation.
    reactor: Option<(u32, Arc<Mutex<Snapshots>>)>,
}

/// Snapshots a program keeps, each about the size of the memory its initialisation
/// changed (5.5 MB for the ConfigSet manager).
pub const SNAPSHOTS_MAX: usize = 16;

/// A program's snapshots by what its initialisation reads (arguments, environment,
/// files); `None` for inputs whose initialisation cannot be snapshotted.
type Snapshots = BTreeMap<(Vec<String>, Vec<String>, Files), Option<Arc<Snapshot>>>;

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("path", &self.path)
            .field("sha256", &self.sha256_hex())
            .finish()
    }
}

/// Where compiled modules are kept across processes: `RECONSIM_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/reconsim`, else `$HOME/.cache/reconsim`; the latest
/// [`CACHED_MODULES_MAX`] only.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("RECONSIM_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("reconsim"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("reconsim"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The module for `bytes`, from the disk cache when it holds one compiled by this
/// engine, else compiled and put there (best effort: a cache that cannot be written
/// only costs the next process a compile).
///
/// A program built for snapshots is compiled with its globals exported
/// ([`snapshot::export_globals`], `globals` is their count), under a name of its own;
/// the rewrite is made only when the module is compiled.
fn compile(
    path: &Path,
    bytes: &[u8],
    sha: &[u8; 32],
    globals: Option<u32>,
) -> Result<Module, LoadError> {
    let engine = engine();
    let mut h = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    let compat = std::hash::Hasher::finish(&h);
    let form = match globals {
        Some(_) => snapshot::REWRITE,
        None => "start",
    };
    let cached = cache_dir().map(|d| d.join(format!("go-{}-{form}-{compat:016x}.cwasm", hex(sha))));
    if let Some(file) = &cached
        && file.is_file()
    {
        // SAFETY: the file is one this engine's configuration wrote (its name holds
        // the engine's compatibility hash and the module's SHA-256), in the user's
        // own cache directory.
        if let Ok(m) = unsafe { Module::deserialize_file(engine, file) } {
            return Ok(m);
        }
    }
    let compile_error = |error: String| LoadError::Compile {
        path: path.to_path_buf(),
        error,
    };
    let module = match globals {
        Some(n) => {
            let code = snapshot::export_globals(bytes, n).map_err(|e| compile_error(e.0))?;
            Module::new(engine, code)
        }
        None => Module::new(engine, bytes),
    }
    .map_err(|e| compile_error(format!("{e:#}")))?;
    if let Some(file) = cached
        && let Ok(data) = module.serialize()
        && let Some(dir) = file.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, data).is_ok() && std::fs::rename(&tmp, &file).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        evict(dir);
    }
    Ok(module)
}

/// Compiled modules the cache keeps: a manager's is about 220 MB, so the cache holds
/// the latest few builds and no more.
pub const CACHED_MODULES_MAX: usize = 6;

/// Removes all but the [`CACHED_MODULES_MAX`] most recently written modules.
fn evict(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut modules: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "cwasm")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("go-"))
        })
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    modules.sort();
    let excess = modules.len().saturating_sub(CACHED_MODULES_MAX);
    for (_, p) in modules.into_iter().take(excess) {
        let _ = std::fs::remove_file(p);
    }
}

impl Program {
    /// The program at `path`: a `.wasm` file built with `GOOS=wasip1 GOARCH=wasm`.
    /// Compiled once per content in this process, and once per content and engine on
    /// disk ([`cache_dir`]).
    pub fn load(path: &Path) -> Result<Program, LoadError> {
        static LOADED: Mutex<BTreeMap<[u8; 32], Program>> = Mutex::new(BTreeMap::new());
        // A FIFO or a device would block the read or never end: only a regular file.
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return Err(LoadError::Read {
                path: path.to_path_buf(),
                error: std::io::Error::other(
                    "not a regular file (a .wasm, or a folder holding a Go main package)",
                ),
            });
        }
        let bytes = std::fs::read(path).map_err(|error| LoadError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        if !bytes.starts_with(b"\0asm") {
            return Err(LoadError::NotWasip1 {
                path: path.to_path_buf(),
                why: "not a WebAssembly module (no \\0asm header)".into(),
            });
        }
        let sha: [u8; 32] = Sha256::digest(&bytes).into();
        // One load at a time: a second thread asking for the same program waits for
        // the first one's compile instead of compiling it again.
        static LOADING: Mutex<()> = Mutex::new(());
        let _one = LOADING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = LOADED.lock().expect("the programs' lock").get(&sha) {
            return Ok(Program {
                path: path.to_path_buf(),
                ..p.clone()
            });
        }
        let globals = snapshot::reactor_globals(&bytes).map_err(|e| LoadError::Compile {
            path: path.to_path_buf(),
            error: e.0,
        })?;
        let module = compile(path, &bytes, &sha, globals)?;
        let not = |why: &str| LoadError::NotWasip1 {
            path: path.to_path_buf(),
            why: why.to_string(),
        };
        if globals.is_none() && module.get_export("_start").is_none() {
            return Err(not("it exports no _start"));
        }
        if module.get_export("memory").is_none() {
            return Err(not("it exports no memory"));
        }
        let mut linker = Linker::new(engine());
        wasi::add_to_linker(&mut linker, &module).map_err(|e| not(&format!("{e:#}")))?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| not(&format!("{e:#}")))?;
        let p = Program {
            sha256: sha,
            path: path.to_path_buf(),
            pre,
            reactor: globals.map(|g| (g, Arc::new(Mutex::new(Snapshots::new())))),
        };
        LOADED
            .lock()
            .expect("the programs' lock")
            .insert(sha, p.clone());
        Ok(p)
    }

    pub fn sha256_hex(&self) -> String {
        hex(&self.sha256)
    }

    /// How a start of this program in `host` begins: from `_start`, or from
    /// `_initialize` then `reconsim_main`, with the snapshot of initialisation when
    /// one can be taken (taken at the first start with these inputs).
    fn begin(&self, host: &Host) -> Begin {
        let Some((globals, snapshots)) = &self.reactor else {
            return Begin::Start;
        };
        let key = (host.args.clone(), host.env.clone(), (*host.files).clone());
        let mut snapshots = snapshots.lock().unwrap_or_else(|e| e.into_inner());
        // Each pod name is an environment of its own (`POD_NAME`), and a replacement
        // pod's name is drawn: the map is bounded. Which entry goes costs only time
        // (a snapshot is the same whenever it is taken), never an outcome.
        if !snapshots.contains_key(&key) && snapshots.len() >= SNAPSHOTS_MAX {
            snapshots.pop_first();
        }
        let taken = snapshots.entry(key).or_insert_with(|| {
            let init = Host::initializing(host.args.clone(), host.env.clone(), host.files.clone());
            Snapshot::take(&self.pre, *globals, init).map(Arc::new)
        });
        match taken {
            Some(s) => Begin::Snapshot(s.clone()),
            None => Begin::Initialize,
        }
    }

    /// The snapshot a start in `host` begins from, if any (taking it if need be).
    pub fn snapshot(&self, host: &Host) -> Option<Arc<Snapshot>> {
        match self.begin(host) {
            Begin::Snapshot(s) => Some(s),
            _ => None,
        }
    }
}

/// How a start of a program begins.
enum Begin {
    /// `_start`: a program built without reconsim's overlay.
    Start,
    /// `_initialize` in the run, then `reconsim_main`: initialisation that cannot be
    /// snapshotted.
    Initialize,
    /// The snapshot written into the instance, then `reconsim_main`.
    Snapshot(Arc<Snapshot>),
}

/// Why the guest stopped running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// It waits in `poll_oneoff`: for a socket, or until a deadline.
    Waiting(Wait),
    /// It called `proc_exit`, or `_start` returned (status 0).
    Exited(i32),
    /// It trapped (a Go panic that reached the runtime ends in `proc_exit(2)`; a trap
    /// is the runtime itself failing, or an import not served).
    Trapped(String),
    /// It ran [`SLICES_PER_STEP_MAX`] slices of fuel without waiting.
    Busy,
}

type Run = Pin<Box<dyn Future<Output = wasmtime::Result<()>> + Send>>;

/// One start of a Go program: its instance, suspended between steps.
pub struct Running {
    pub host: Arc<Mutex<Host>>,
    run: Option<Run>,
}

impl Running {
    /// Starts `program` in `host`'s world. Nothing runs until [`Running::resume`].
    pub fn start(program: &Program, host: Host) -> Running {
        let begin = program.begin(&host);
        let host = Arc::new(Mutex::new(host));
        let pre = program.pre.clone();
        let shared = host.clone();
        let run: Run = Box::pin(async move {
            let mut store = Store::new(
                engine(),
                Guest {
                    host: shared.clone(),
                    memory: None,
                },
            );
            store.set_fuel(u64::MAX)?;
            store.fuel_async_yield_interval(Some(FUEL_SLICE))?;
            let instance = pre.instantiate_async(&mut store).await?;
            store.data_mut().memory = wasi::memory_of(&instance, &mut store);
            let call = |store: &mut Store<Guest>, name: &str| {
                instance.get_typed_func::<(), ()>(store, name)
            };
            match begin {
                Begin::Start => {
                    let start = call(&mut store, "_start")?;
                    start.call_async(&mut store, ()).await
                }
                Begin::Initialize => {
                    let init = call(&mut store, snapshot::INITIALIZE)?;
                    init.call_async(&mut store, ()).await?;
                    let main = call(&mut store, snapshot::MAIN)?;
                    main.call_async(&mut store, ()).await
                }
                Begin::Snapshot(s) => {
                    s.restore(&mut store, &instance)?;
                    shared.lock().expect("the host's lock").adopt(&s.init);
                    let main = call(&mut store, snapshot::MAIN)?;
                    main.call_async(&mut store, ()).await
                }
            }
        });
        Running {
            host,
            run: Some(run),
        }
    }

    /// Runs the guest until it waits, exits or fails.
    pub fn resume(&mut self) -> Stop {
        let Some(run) = &mut self.run else {
            return Stop::Exited(0);
        };
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..SLICES_PER_STEP_MAX {
            match run.as_mut().poll(&mut cx) {
                Poll::Ready(r) => {
                    self.run = None;
                    return match r {
                        Ok(()) => Stop::Exited(0),
                        Err(e) => match e.downcast_ref::<ProcExit>() {
                            Some(ProcExit(code)) => Stop::Exited(*code),
                            None => Stop::Trapped(format!("{e:#}")),
                        },
                    };
                }
                Poll::Pending => {
                    let mut h = self.host.lock().expect("the host's lock");
                    if let Some(w) = h.wait.take() {
                        return Stop::Waiting(w);
                    }
                    // A fuel slice ran out: go on.
                }
            }
        }
        Stop::Busy
    }

    /// Whether the program still runs.
    pub fn alive(&self) -> bool {
        self.run.is_some()
    }
}
