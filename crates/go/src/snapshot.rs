//! Start-up paid once (go-path.md B6): a Go program's state after its runtime's and
//! packages' initialisation, taken once per program and inputs, and each start of its
//! process begun from it.
//!
//! reconsim builds a program with `-buildmode=c-shared` ([`crate::build`]): the module
//! exports `_initialize` (the runtime's start-up and every package's `init`, then it
//! returns) and, from the overlay, `reconsim_main` (the runtime's random state drawn
//! anew from `random_get`, then `main`, then the exit Go makes when `main` returns).
//! The module is loaded with its globals exported ([`export_globals`]), so that once
//! `_initialize` has returned, the instance's whole state is its linear memory and
//! its globals: a [`Snapshot`] keeps the memory pages that differ from a fresh
//! instance's and the globals' values, and [`Snapshot::restore`] writes them into the
//! fresh instance of a run.
//!
//! What initialisation sees is fixed, so the snapshot is the same whenever and
//! wherever it is taken: the monotonic clock at the run's time 0, the wall clock at the
//! run's epoch (a nanosecond later a read), entropy from a stream seeded by the
//! program's arguments and environment ([`Host::initializing`]). `reconsim_main` then
//! reseeds the runtime from the run's own stream, so map order, `select`, `math/rand`
//! and everything drawn after start-up follow the run's seed, as without a snapshot.
//! A program whose initialisation waits (a sleep, a socket) or dials is not
//! snapshotted: its initialisation runs in each run, on the run's clocks and entropy.

use crate::host::{Host, InitState};
use crate::wasi::Guest;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wasmtime::{InstancePre, Store, Val};

/// The export that runs Go's initialisation and returns (a `c-shared` build).
pub const INITIALIZE: &str = "_initialize";
/// The export that runs `main` after it (reconsim's overlay).
pub const MAIN: &str = "reconsim_main";
/// The name global `i` is exported under.
fn global_name(i: u32) -> String {
    format!("reconsim.global.{i}")
}

/// Why a module could not be rewritten.
#[derive(Debug)]
pub struct RewriteError(pub String);

/// The form of a rewritten module, named in its compiled file's name: another
/// rewrite gets another name, so a module compiled by an older one is never loaded.
pub const REWRITE: &str = "globals1";

/// The number of globals of a program built for snapshots (it exports [`INITIALIZE`]
/// and [`MAIN`]); `None` for any other module, which runs from `_start` as built.
pub fn reactor_globals(bytes: &[u8]) -> Result<Option<u32>, RewriteError> {
    use wasmparser::{ExternalKind, Parser, Payload, TypeRef};
    let err = |e: wasmparser::BinaryReaderError| RewriteError(e.to_string());
    let (mut globals, mut init, mut main) = (0u32, false, false);
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(err)? {
            Payload::ImportSection(r) => {
                for i in r {
                    if matches!(i.map_err(err)?.ty, TypeRef::Global(_)) {
                        globals += 1;
                    }
                }
            }
            Payload::GlobalSection(r) => globals += r.count(),
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e.map_err(err)?;
                    if e.kind == ExternalKind::Func {
                        init |= e.name == INITIALIZE;
                        main |= e.name == MAIN;
                    }
                }
            }
            // The code is most of a module and holds no declaration.
            Payload::CodeSectionStart { .. } | Payload::CodeSectionEntry(_) => {}
            _ => {}
        }
    }
    Ok((init && main).then_some(globals))
}

/// `bytes` with its `globals` globals exported too (as `reconsim.global.<index>`),
/// every other section as it was.
pub fn export_globals(bytes: &[u8], globals: u32) -> Result<Vec<u8>, RewriteError> {
    use wasmparser::{ExternalKind, Parser, Payload};
    let err = |e: wasmparser::BinaryReaderError| RewriteError(e.to_string());
    let mut out = wasm_encoder::Module::new();
    let mut exported = false;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(err)?;
        if let Payload::ExportSection(r) = &payload {
            let mut section = wasm_encoder::ExportSection::new();
            for e in r.clone() {
                let e = e.map_err(err)?;
                let kind = match e.kind {
                    ExternalKind::Func => wasm_encoder::ExportKind::Func,
                    ExternalKind::Table => wasm_encoder::ExportKind::Table,
                    ExternalKind::Memory => wasm_encoder::ExportKind::Memory,
                    ExternalKind::Global => wasm_encoder::ExportKind::Global,
                    ExternalKind::Tag => wasm_encoder::ExportKind::Tag,
                };
                section.export(e.name, kind, e.index);
            }
            for i in 0..globals {
                section.export(&global_name(i), wasm_encoder::ExportKind::Global, i);
            }
            out.section(&section);
            exported = true;
        } else if let Some((id, range)) = payload.as_section() {
            out.section(&wasm_encoder::RawSection {
                id,
                data: &bytes[range],
            });
        }
    }
    if !exported {
        return Err(RewriteError("the module has no export section".into()));
    }
    Ok(out.finish())
}

/// A program's state after `_initialize`, ready to be written into a fresh instance.
pub struct Snapshot {
    /// The memory's size in wasm pages.
    pages: u64,
    /// The byte ranges that differ from a fresh instance's memory, and their bytes.
    dirty: Vec<(usize, Box<[u8]>)>,
    /// Every global's value, by index.
    globals: Vec<Val>,
    /// What the host kept of initialisation (its lines, descriptors, clock reads).
    pub init: InitState,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("pages", &self.pages)
            .field("dirty_bytes", &self.dirty_bytes())
            .finish()
    }
}

/// Dirty ranges are compared and kept in pieces of this many bytes.
const PIECE: usize = 4096;

/// Polls `f` to its end on this thread; `None` if it waits for something (a host call
/// that is pending) or runs [`crate::guest::SLICES_PER_STEP_MAX`] fuel slices.
fn finish<T>(mut f: Pin<Box<dyn Future<Output = T> + Send + '_>>, host: &Mutex<Host>) -> Option<T> {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..crate::guest::SLICES_PER_STEP_MAX {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return Some(v),
            Poll::Pending => {
                if host.lock().expect("the host's lock").wait.is_some() {
                    return None;
                }
            }
        }
    }
    None
}

impl Snapshot {
    /// Runs `_initialize` of `pre` in `host` (which must be [`Host::initializing`]):
    /// the state it leaves, or `None` if initialisation waited, dialled, failed or
    /// never ended.
    pub fn take(pre: &InstancePre<Guest>, globals: u32, host: Host) -> Option<Snapshot> {
        let host = Arc::new(Mutex::new(host));
        let engine = crate::guest::engine();
        let new_store = || {
            let mut store = Store::new(
                engine,
                Guest {
                    host: host.clone(),
                    memory: None,
                },
            );
            store.set_fuel(u64::MAX).ok()?;
            store
                .fuel_async_yield_interval(Some(crate::guest::FUEL_SLICE))
                .ok()?;
            Some(store)
        };
        // A fresh instance's memory: what each run's instance starts with.
        let mut fresh = new_store()?;
        let fresh_instance = finish(Box::pin(pre.instantiate_async(&mut fresh)), &host)?.ok()?;
        let fresh_memory = crate::wasi::memory_of(&fresh_instance, &mut fresh)?;
        let mut store = new_store()?;
        let taken = finish(
            Box::pin(async {
                let instance: wasmtime::Instance = pre.instantiate_async(&mut store).await?;
                store.data_mut().memory = crate::wasi::memory_of(&instance, &mut store);
                let init = instance.get_typed_func::<(), ()>(&mut store, INITIALIZE)?;
                init.call_async(&mut store, ()).await?;
                Ok::<_, wasmtime::Error>(instance)
            }),
            &host,
        )?;
        let instance = taken.ok()?;
        let h = host.lock().expect("the host's lock");
        if h.dials > 0 || !h.sockets.is_empty() {
            return None;
        }
        let memory = store.data().memory?;
        let now = memory.data(&store);
        let before = fresh_memory.data(&fresh);
        let mut dirty: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut at = 0;
        while at < now.len() {
            let end = (at + PIECE).min(now.len());
            if before.get(at..end) != Some(&now[at..end]) {
                match dirty.last_mut() {
                    // The range before ends here: it goes on.
                    Some((start, bytes)) if *start + bytes.len() == at => {
                        bytes.extend_from_slice(&now[at..end]);
                    }
                    _ => dirty.push((at, now[at..end].to_vec())),
                }
            }
            at = end;
        }
        let dirty: Vec<(usize, Box<[u8]>)> = dirty
            .into_iter()
            .map(|(at, b)| (at, b.into_boxed_slice()))
            .collect();
        let mut values = Vec::with_capacity(globals as usize);
        for i in 0..globals {
            let g = instance.get_global(&mut store, &global_name(i))?;
            values.push(g.get(&mut store));
        }
        Some(Snapshot {
            pages: memory.size(&store),
            dirty,
            globals: values,
            init: h.init_state(),
        })
    }

    /// Bytes written into each run's memory.
    pub fn dirty_bytes(&self) -> usize {
        self.dirty.iter().map(|(_, b)| b.len()).sum()
    }

    /// Writes the state into `instance`, a fresh instance of the same module.
    pub fn restore(
        &self,
        store: &mut Store<Guest>,
        instance: &wasmtime::Instance,
    ) -> wasmtime::Result<()> {
        let memory = store
            .data()
            .memory
            .ok_or_else(|| wasmtime::Error::msg("the module has no memory"))?;
        let grow = self.pages.saturating_sub(memory.size(&*store));
        if grow > 0 {
            memory.grow(&mut *store, grow)?;
        }
        let data = memory.data_mut(&mut *store);
        for (at, bytes) in &self.dirty {
            data[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        for (i, v) in self.globals.iter().enumerate() {
            let g = instance
                .get_global(&mut *store, &global_name(i as u32))
                .ok_or_else(|| wasmtime::Error::msg(format!("global {i} is not exported")))?;
            // A constant global holds its value already (Go's are all variables).
            if g.ty(&*store).mutability() == wasmtime::Mutability::Var {
                g.set(&mut *store, *v)?;
            }
        }
        Ok(())
    }
}
