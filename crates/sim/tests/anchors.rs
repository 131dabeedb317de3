//! Faults anchored to events: each kind lands exactly at its message, the counting
//! follows the anchor's process, and a reference run records its decision points.
//!
//! The world is a client that writes `Write(1..=rounds)` to a server one at a time (the
//! next write when the last is acknowledged, as one reconcile's steps go), and a server
//! that acknowledges each and tells a watcher of it with an `Event`. Latency is a fixed
//! 10 ms, so every expected time can be written down.

use reconsim_sim::trace::DropReason;
use reconsim_sim::{
    Actor, Anchor, Ctx, EventClass, Fault, FaultPlan, NetConfig, Position, ProcId, RecordKind, Sim,
    SimConfig, SimTime, TimedFault, TimerId, TraceMode,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Msg {
    Write(u64),
    Ack(u64),
    Event(u64),
}

#[derive(Debug)]
enum Role {
    Client { server: ProcId, rounds: u64 },
    Server { watcher: ProcId },
    Watcher,
}

#[derive(Debug)]
struct Node {
    role: Role,
    /// (local time, message) of everything received.
    got: Vec<(u64, Msg)>,
    starts: u32,
}

impl Actor for Node {
    type Msg = Msg;
    type Fault = String;

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.starts += 1;
        if let Role::Client { server, .. } = self.role {
            ctx.send(server, Msg::Write(1));
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut Ctx<'_, Self>) {
        self.got.push((ctx.now().as_ms(), msg.clone()));
        match (&self.role, msg) {
            (Role::Client { server, rounds }, Msg::Ack(n)) if n < *rounds => {
                ctx.send(*server, Msg::Write(n + 1));
            }
            (Role::Server { watcher }, Msg::Write(n)) => {
                ctx.send(from, Msg::Ack(n));
                ctx.send(*watcher, Msg::Event(n));
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, _: TimerId, _: Msg, _: &mut Ctx<'_, Self>) {}

    fn classify(msg: &Msg) -> Option<EventClass> {
        match msg {
            Msg::Write(_) => Some(EventClass::Write),
            Msg::Event(_) => Some(EventClass::WatchEvent),
            Msg::Ack(_) => None,
        }
    }

    fn request_id(msg: &Msg) -> Option<u64> {
        match msg {
            Msg::Write(n) => Some(*n),
            _ => None,
        }
    }

    fn answer_id(msg: &Msg) -> Option<u64> {
        match msg {
            Msg::Ack(n) => Some(*n),
            _ => None,
        }
    }
}

struct World {
    sim: Sim<Node>,
    client: ProcId,
    server: ProcId,
    watcher: ProcId,
}

fn node(role: Role) -> Node {
    Node {
        role,
        got: Vec::new(),
        starts: 0,
    }
}

fn world(faults: Vec<TimedFault<String>>, record: bool) -> World {
    let mut config = SimConfig::new(7);
    config.net = NetConfig {
        latency_ms_min: 10,
        latency_ms_max: 10,
        ..Default::default()
    };
    config.trace = TraceMode::Full;
    config.record_decisions = record;
    let mut sim = Sim::new(config, FaultPlan::new(faults));
    let (ha, hb, hc) = (sim.add_host("a"), sim.add_host("b"), sim.add_host("c"));
    // Ids are handed out in spawn order: watcher 0, server 1, client 2.
    let watcher = sim.spawn(hc, "watcher", node(Role::Watcher));
    let server = sim.spawn(hb, "server", node(Role::Server { watcher }));
    let client = sim.spawn(ha, "client", node(Role::Client { server, rounds: 4 }));
    sim.run_until(SimTime(1_000));
    World {
        sim,
        client,
        server,
        watcher,
    }
}

fn anchored(
    process: &str,
    event: EventClass,
    nth: u32,
    position: Position,
    duration_ms: Option<u64>,
    fault: Fault<String>,
) -> TimedFault<String> {
    TimedFault::on(
        Anchor {
            process: process.into(),
            event,
            nth,
            position,
        },
        duration_ms,
        fault,
    )
}

fn got(w: &World, p: ProcId) -> Vec<(u64, Msg)> {
    w.sim.actor(p).got.clone()
}

fn crash_client() -> Fault<String> {
    Fault::Crash {
        process: "client".into(),
    }
}

#[test]
fn the_reference_run_writes_at_known_times() {
    let w = world(vec![], false);
    assert_eq!(
        got(&w, w.server),
        vec![
            (10, Msg::Write(1)),
            (30, Msg::Write(2)),
            (50, Msg::Write(3)),
            (70, Msg::Write(4))
        ]
    );
    assert_eq!(w.sim.actor(w.watcher).got.len(), 4);
}

#[test]
fn a_crash_right_after_the_second_write_lets_it_land_and_loses_its_answer() {
    let w = world(
        vec![anchored(
            "client",
            EventClass::Write,
            2,
            Position::After,
            Some(100),
            crash_client(),
        )],
        false,
    );
    // Write 2 left at 20 and landed; the client restarted cold at 120 and began again.
    assert_eq!(
        got(&w, w.server),
        vec![
            (10, Msg::Write(1)),
            (30, Msg::Write(2)),
            (130, Msg::Write(1)),
            (150, Msg::Write(2)),
            (170, Msg::Write(3)),
            (190, Msg::Write(4)),
        ]
    );
    assert_eq!(w.sim.actor(w.client).starts, 2);
    assert_eq!(w.sim.fired_at(0), Some(SimTime(20)));
    assert_eq!(w.sim.heal_ms(), Some(120));
}

#[test]
fn a_crash_just_before_the_second_write_means_it_never_leaves() {
    let w = world(
        vec![anchored(
            "client",
            EventClass::Write,
            2,
            Position::Before,
            Some(100),
            crash_client(),
        )],
        false,
    );
    assert_eq!(
        got(&w, w.server)[..2],
        [(10, Msg::Write(1)), (130, Msg::Write(1))]
    );
    let dropped = w
        .sim
        .trace()
        .records()
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                RecordKind::Dropped {
                    reason: DropReason::Fault,
                    ..
                }
            )
        })
        .count();
    assert_eq!(dropped, 1, "the write the crash kept from leaving");
}

#[test]
fn a_pause_just_before_a_write_sends_it_at_the_resume() {
    let w = world(
        vec![anchored(
            "client",
            EventClass::Write,
            3,
            Position::Before,
            Some(500),
            Fault::Pause {
                process: "client".into(),
            },
        )],
        false,
    );
    // Write 3 was due to leave at 40: it leaves at 540, when the pause ends.
    assert_eq!(
        got(&w, w.server),
        vec![
            (10, Msg::Write(1)),
            (30, Msg::Write(2)),
            (550, Msg::Write(3)),
            (570, Msg::Write(4)),
        ]
    );
}

#[test]
fn message_faults_drop_delay_or_lose_the_answer_of_exactly_their_message() {
    let drop = world(
        vec![anchored(
            "client",
            EventClass::Write,
            2,
            Position::After,
            None,
            Fault::DropMessage,
        )],
        false,
    );
    assert_eq!(got(&drop, drop.server), vec![(10, Msg::Write(1))]);

    let lose = world(
        vec![anchored(
            "client",
            EventClass::Write,
            2,
            Position::After,
            None,
            Fault::LoseAnswer,
        )],
        false,
    );
    // The write landed; its answer never came back, so the client went no further.
    assert_eq!(
        got(&lose, lose.server),
        vec![(10, Msg::Write(1)), (30, Msg::Write(2))]
    );
    assert_eq!(got(&lose, lose.client), vec![(20, Msg::Ack(1))]);

    // The watcher's second event is 300 ms late; its link is FIFO, so the third waits
    // behind it.
    let delay = world(
        vec![anchored(
            "watcher",
            EventClass::WatchEvent,
            2,
            Position::After,
            None,
            Fault::DelayMessage { extra_ms: 300 },
        )],
        false,
    );
    let events: Vec<u64> = got(&delay, delay.watcher).iter().map(|(t, _)| *t).collect();
    assert_eq!(events, vec![20, 340, 340, 340]);
    assert_eq!(delay.sim.heal_ms(), Some(30));
}

#[test]
fn counting_starts_when_the_fault_is_armed_and_an_event_that_never_comes_changes_nothing() {
    // Armed at 25 ms: write 3 (at 40) is the first it counts.
    let mut late = anchored(
        "client",
        EventClass::Write,
        1,
        Position::After,
        None,
        Fault::DropMessage,
    );
    late.at_ms = 25;
    let w = world(vec![late], false);
    assert_eq!(
        got(&w, w.server),
        vec![(10, Msg::Write(1)), (30, Msg::Write(2))]
    );

    let never = anchored(
        "client",
        EventClass::Write,
        9,
        Position::After,
        Some(10),
        crash_client(),
    );
    let untouched = world(vec![never], false);
    let reference = world(vec![], false);
    assert_eq!(untouched.sim.trace().hash(), reference.sim.trace().hash());
    assert_eq!(untouched.sim.fired_at(0), None);
    assert_eq!(untouched.sim.heal_ms(), Some(0));
}

#[test]
fn a_reference_run_records_each_decision_and_what_it_followed() {
    let w = world(vec![], true);
    let d = w.sim.decisions();
    let writes: Vec<_> = d.iter().filter(|p| p.event == EventClass::Write).collect();
    assert_eq!(writes.len(), 4);
    assert_eq!(
        writes
            .iter()
            .map(|p| (p.nth, p.time_ms))
            .collect::<Vec<_>>(),
        vec![(1, 0), (2, 20), (3, 40), (4, 60)]
    );
    assert!(
        writes
            .iter()
            .all(|p| p.process == "client" && p.peer == "server")
    );
    // Each write after the first was sent by the handler of the previous one's answer.
    let index_of = |nth: u32| {
        d.iter()
            .position(|p| p.event == EventClass::Write && p.nth == nth)
    };
    assert_eq!(writes[0].after_answer_of, None);
    for (k, w) in writes.iter().enumerate().skip(1) {
        assert_eq!(w.after_answer_of, index_of(k as u32));
    }
    let events: Vec<_> = d
        .iter()
        .filter(|p| p.event == EventClass::WatchEvent)
        .collect();
    assert_eq!(events.len(), 4);
    assert!(
        events
            .iter()
            .all(|p| p.process == "watcher" && p.peer == "server")
    );
    // Recording changes nothing of the history.
    assert_eq!(
        w.sim.trace().hash(),
        world(vec![], false).sim.trace().hash()
    );
}

#[test]
fn anchored_plans_replay_to_the_same_hash() {
    let plan = || {
        vec![
            anchored(
                "client",
                EventClass::Write,
                2,
                Position::After,
                Some(100),
                crash_client(),
            ),
            anchored(
                "watcher",
                EventClass::WatchEvent,
                3,
                Position::After,
                None,
                Fault::DelayMessage { extra_ms: 40 },
            ),
        ]
    };
    let a = world(plan(), false);
    let b = world(plan(), false);
    assert_eq!(a.sim.trace().hash(), b.sim.trace().hash());
    assert_ne!(
        a.sim.trace().hash(),
        world(vec![], false).sim.trace().hash()
    );
}

#[test]
fn anchored_faults_round_trip_through_json() {
    let f = anchored(
        "client",
        EventClass::Renewal,
        3,
        Position::Before,
        Some(60_000),
        Fault::Pause {
            process: "client".into(),
        },
    );
    let json = serde_json::to_string(&f).unwrap();
    assert!(
        json.contains(r#""on":{"process":"client","event":"renewal","nth":3,"position":"before"}"#),
        "{json}"
    );
    let back: TimedFault<String> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, f);
    // A timed fault's JSON is as it always was.
    let timed = TimedFault::at(5, Some(1), Fault::<String>::LoseAnswer);
    assert!(!serde_json::to_string(&timed).unwrap().contains("\"on\""));
}
