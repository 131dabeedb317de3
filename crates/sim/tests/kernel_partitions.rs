//! Kernel tests of the network faults: drop and hold partitions (TCP's bounds, a
//! retransmitting client, one-way cuts) and slow links.

use reconsim_sim::trace::DropReason;
use reconsim_sim::{Fault, PartitionMode, ProcId, RecordKind, Sim, SimTime, TraceMode};

mod common;
use common::*;

// ----- partitions ---------------------------------------------------------------------

/// `s` on host a1 ticks `Seq(i)` every 10 ms (at 5, 15, ..., 595) to `r_same` on a2 and
/// to `r_other` on b; latency is a fixed 3 ms, so `Seq(i)` arrives at `8 + 10 i`.
fn partition_world(fault: Fault<String>, at: u64, dur: u64) -> (Sim<Node>, [ProcId; 3]) {
    let mut sim = new_sim(
        config(3, 3, 3, TraceMode::Full),
        vec![timed(at, Some(dur), fault)],
    );
    let (a1, a2, b) = (sim.add_host("a1"), sim.add_host("a2"), sim.add_host("b"));
    let r_same = sim.spawn(a2, "r_same", Node::new(Role::Recorder));
    let r_other = sim.spawn(b, "r_other", Node::new(Role::Recorder));
    let s = sim.spawn(
        a1,
        "s",
        Node::new(Role::Ticker {
            to: vec![r_same, r_other],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    (sim, [s, r_same, r_other])
}

#[test]
fn drop_partition_loses_crossing_messages_only_and_heals() {
    let fault = partition(&["a1", "a2"], &["b"], PartitionMode::Drop, false);
    let (sim, [s, r_same, r_other]) = partition_world(fault, 100, 200);
    // Within side a: everything flows.
    let same = seqs_from(&sim, r_same, s);
    assert_eq!(same, (0..60).map(|i| (8 + 10 * i, i)).collect::<Vec<_>>());
    // Across: messages arriving in [100, 300) are lost and recorded as such...
    let other = seqs_from(&sim, r_other, s);
    let expected: Vec<(u64, u64)> = (0..60)
        .map(|i| (8 + 10 * i, i))
        .filter(|(t, _)| !(100..300).contains(t))
        .collect();
    assert_eq!(other, expected);
    let dropped = drops(&sim, s, r_other, DropReason::Partition);
    assert_eq!(dropped, (10..30).map(|i| 8 + 10 * i).collect::<Vec<_>>());
    // ...and after the heal delivery resumes (the last message arrived at 598).
    assert_eq!(other.last(), Some(&(598, 59)));
    assert_eq!(
        fault_records(&sim),
        vec![(100, 0, true, true), (300, 0, false, true)]
    );
}

#[test]
fn a_message_a_dropping_partition_loses_breaks_its_connection_for_the_client() {
    // TCP never loses one message of a stream silently (semantics 4.12): each loss is
    // heard by the stream's receiver (the client end), at the loss, as its transport
    // says (`gave_up`: `GaveUp(i)` for `Seq(i)`). Nothing is heard on side a.
    let fault = partition(&["a1", "a2"], &["b"], PartitionMode::Drop, false);
    let (sim, [s, r_same, r_other]) = partition_world(fault, 100, 200);
    let heard: Vec<(u64, u64)> = log(&sim, r_other)
        .iter()
        .filter_map(|e| match e {
            Seen::Msg {
                now,
                from,
                msg: Msg::GaveUp(n),
            } if *from == r_other => Some((*now, *n)),
            _ => None,
        })
        .collect();
    assert_eq!(heard, (10..30).map(|i| (8 + 10 * i, i)).collect::<Vec<_>>());
    for p in [s, r_same] {
        assert!(
            !log(&sim, p).iter().any(|e| matches!(
                e,
                Seen::Msg {
                    msg: Msg::GaveUp(_),
                    ..
                }
            )),
            "{p} heard of a loss it had no part in"
        );
    }
}

#[test]
fn hold_partition_delivers_held_messages_in_order_after_heal() {
    let fault = partition(&["a1", "a2"], &["b"], PartitionMode::Hold, false);
    let (sim, [s, r_same, r_other]) = partition_world(fault, 100, 200);
    assert_eq!(seqs_from(&sim, r_same, s).len(), 60);
    let other = seqs_from(&sim, r_other, s);
    // Nothing lost, nothing reordered, nothing handled while the partition stands.
    assert_eq!(
        other.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
        (0..60).collect::<Vec<_>>()
    );
    assert!(
        other.iter().all(|(t, _)| !(100..300).contains(t)),
        "{other:?}"
    );
    // The twenty held ones come out, in order, at the instant the partition heals (they
    // already crossed the network).
    let released: Vec<(u64, u64)> = other
        .iter()
        .copied()
        .filter(|(_, i)| (10..30).contains(i))
        .collect();
    assert_eq!(released, (10..30).map(|i| (300, i)).collect::<Vec<_>>());
    let held = records(&sim)
        .iter()
        .filter(|r| matches!(r.kind, RecordKind::Held { from, to } if from == s && to == r_other))
        .map(|r| r.time.as_ms())
        .collect::<Vec<_>>();
    assert_eq!(held, (10..30).map(|i| 8 + 10 * i).collect::<Vec<_>>());
    assert!(drops(&sim, s, r_other, DropReason::Partition).is_empty());
}

/// A ticker on `a` sending every 10 s from 5 s to a recorder on `b`, a holding partition
/// between them over [1 s, 201 s), and maybe a crash of the sender at `crash_at_ms`.
fn long_hold_world(crash_at_ms: Option<u64>) -> (Sim<Node>, ProcId, ProcId) {
    cut_world(PartitionMode::Hold, crash_at_ms, None)
}

/// [`long_hold_world`] under either mode, with a sender whose connections retransmit
/// for `retransmit_ms` if set.
fn cut_world(
    mode: PartitionMode,
    crash_at_ms: Option<u64>,
    retransmit_ms: Option<u64>,
) -> (Sim<Node>, ProcId, ProcId) {
    let mut faults = vec![timed(
        1_000,
        Some(200_000),
        partition(&["a"], &["b"], mode, false),
    )];
    if let Some(at) = crash_at_ms {
        faults.push(timed(
            at,
            None,
            Fault::Crash {
                process: "s".into(),
            },
        ));
    }
    let mut sim = new_sim(config(5, 3, 3, TraceMode::Full), faults);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let r = sim.spawn(hb, "r", Node::new(Role::Recorder));
    let ticker = Role::Ticker {
        to: vec![r],
        first_ms: 5_000,
        every_ms: 10_000,
        count: 30,
    };
    let node = match retransmit_ms {
        Some(ms) => Node::retransmitting(ticker, ms),
        None => Node::new(ticker),
    };
    let s = sim.spawn(ha, "s", node);
    sim.run_until(SimTime::from_secs(400));
    (sim, s, r)
}

/// The numbers of the `Seq` messages delivered at `at_ms` (a heal's release).
fn released_at(got: &[(u64, u64)], at_ms: u64) -> Vec<u64> {
    got.iter()
        .filter(|(t, _)| *t == at_ms)
        .map(|(_, i)| *i)
        .collect()
}

#[test]
fn a_hold_delivers_only_what_tcp_still_retransmits() {
    // Held at 5.003 s, 15.003 s, ..., 195.003 s; the heal at 201 s delivers those held
    // at most 145 s before (from 65 s on) and drops the older ones as expired.
    let (sim, s, r) = long_hold_world(None);
    let got = seqs_from(&sim, r, s);
    let released = released_at(&got, 201_000);
    assert_eq!(released, (6..20).collect::<Vec<_>>(), "{got:?}");
    let expired = drops(&sim, s, r, DropReason::Expired);
    assert_eq!(expired, vec![201_000; 6], "held at 5..55 s");
    assert!(
        got.iter().all(|(_, i)| *i >= 6),
        "nothing older arrives: {got:?}"
    );
}

#[test]
fn a_crashed_senders_held_messages_die_with_its_orphaned_sockets() {
    // The sender crashes at 90 s: its sockets are orphaned and retransmit ~102 s more,
    // to 192.2 s, before the 201 s heal: nothing it sent into the partition arrives.
    let (sim, s, r) = long_hold_world(Some(90_000));
    let got = seqs_from(&sim, r, s);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(
        drops(&sim, s, r, DropReason::Expired).len(),
        9,
        "held at 5..85 s"
    );
}

#[test]
fn a_retransmitting_client_keeps_its_data_across_either_partition_until_it_gives_up() {
    for mode in [PartitionMode::Drop, PartitionMode::Hold] {
        // Held at 5.003 s, 15.003 s, ..., 195.003 s. The client gives up 100 s after
        // each: on those held at 5..95 s (hearing of each at once, from itself); the
        // 201 s heal delivers the rest, in order, and nothing is lost to the partition.
        let (sim, s, r) = cut_world(mode, None, Some(100_000));
        let got = seqs_from(&sim, r, s);
        let released = released_at(&got, 201_000);
        assert_eq!(released, (10..20).collect::<Vec<_>>(), "{mode:?}: {got:?}");
        assert!(got.iter().all(|(_, i)| *i >= 10), "{mode:?}: {got:?}");
        assert!(
            drops(&sim, s, r, DropReason::Partition).is_empty(),
            "{mode:?}"
        );
        let gave_up: Vec<(u64, u64)> = log(&sim, s)
            .iter()
            .filter_map(|seen| match seen {
                Seen::Msg {
                    now,
                    from,
                    msg: Msg::GaveUp(n),
                } if *from == s => Some((*now, *n)),
                _ => None,
            })
            .collect();
        let want: Vec<(u64, u64)> = (0..10).map(|i| (105_003 + 10_000 * i, i)).collect();
        assert_eq!(gave_up, want, "{mode:?}");
        assert_eq!(drops(&sim, s, r, DropReason::Expired).len(), 10, "{mode:?}");
    }
}

#[test]
fn hold_partition_keeps_link_order_with_messages_in_flight_at_heal() {
    // A message every millisecond with 1..10 ms latency: when the partition heals, some
    // messages are still in flight; the held ones, sent earlier, must still come first.
    for seed in 0..20 {
        let mut sim = new_sim(
            config(seed, 1, 10, TraceMode::Hash),
            vec![timed(
                100,
                Some(200),
                partition(&["a"], &["b"], PartitionMode::Hold, false),
            )],
        );
        let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
        let r = sim.spawn(hb, "r", Node::new(Role::Recorder));
        let s = sim.spawn(
            ha,
            "s",
            Node::new(Role::Ticker {
                to: vec![r],
                first_ms: 1,
                every_ms: 1,
                count: 500,
            }),
        );
        sim.run_until(SimTime::from_secs(2));
        let got = seqs_from(&sim, r, s);
        assert_eq!(
            got.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
            (0..500).collect::<Vec<_>>(),
            "seed {seed}"
        );
    }
}

#[test]
fn one_way_partition_cuts_one_direction_only() {
    let mut sim = new_sim(
        config(5, 3, 3, TraceMode::Full),
        vec![timed(
            100,
            Some(200),
            partition(&["a"], &["b"], PartitionMode::Drop, true),
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let ra = sim.spawn(ha, "ra", Node::new(Role::Recorder));
    let rb = sim.spawn(hb, "rb", Node::new(Role::Recorder));
    let ticker = |to| {
        Node::new(Role::Ticker {
            to: vec![to],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        })
    };
    let sa = sim.spawn(ha, "sa", ticker(rb));
    let sb = sim.spawn(hb, "sb", ticker(ra));
    sim.run_until(SimTime::from_secs(2));
    // b -> a: untouched.
    assert_eq!(seqs_from(&sim, ra, sb).len(), 60);
    assert!(drops(&sim, sb, ra, DropReason::Partition).is_empty());
    // a -> b: cut for [100, 300).
    let a_to_b = seqs_from(&sim, rb, sa);
    assert_eq!(a_to_b.len(), 40);
    assert!(a_to_b.iter().all(|(t, _)| !(100..300).contains(t)));
    assert_eq!(drops(&sim, sa, rb, DropReason::Partition).len(), 20);
}

// ----- slow links ---------------------------------------------------------------------

#[test]
fn slow_link_adds_its_extra_latency_while_active() {
    let mut sim = new_sim(
        config(9, 2, 2, TraceMode::Hash),
        vec![timed(
            100,
            Some(200),
            Fault::SlowLink {
                hosts_a: names(&["a"]),
                hosts_b: names(&["b"]),
                extra_latency_ms: 100,
                one_way: false,
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let near = sim.spawn(ha, "near", Node::new(Role::Recorder));
    let far = sim.spawn(hb, "far", Node::new(Role::Recorder));
    // Sends Seq(i) at 5 + 10 i.
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![near, far],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    // Same host: never slowed.
    for (t, i) in seqs_from(&sim, near, s) {
        assert_eq!(t, 5 + 10 * i + 2);
    }
    let far_got = seqs_from(&sim, far, s);
    assert_eq!(far_got.len(), 60);
    for (t, i) in far_got {
        let sent = 5 + 10 * i;
        let expected = if (100..300).contains(&sent) {
            sent + 102
        } else if !(100..=400).contains(&sent) {
            sent + 2
        } else {
            // Sent after the heal but queued behind slow messages on the FIFO link.
            (sent + 2).max(295 + 102)
        };
        assert_eq!(t, expected, "Seq({i}) sent at {sent}");
    }
}
