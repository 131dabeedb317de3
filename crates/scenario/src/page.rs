//! A failure as one self-contained HTML page: the explain story drawn as swimlanes.
//!
//! A lane per process that takes part (a column), time going down, one row per line of
//! `explain`: a request is an arrow from its caller's lane to the API server's or the
//! cloud's, labelled with what became of it; a write the server stored, a reconcile and
//! a note are dots on their lane; each fault is a band beside the lanes for the rows it
//! was active; the violation is the last row, in red; the objects it names are marked
//! wherever a label mentions them. Rows are ordinal, not to scale: a story spans
//! minutes with its steps milliseconds apart (Jepsen's timeline.html does the same for
//! histories). Static SVG and CSS, no script and nothing fetched, so the page opens
//! offline; the same failure replayed by the same command gives the same bytes.

use crate::build::World;
use crate::explain::Explanation;
use reconsim_sim::{ProcId, RecordKind, SimTime};
use std::fmt::Write as _;

/// Rows drawn at most; a longer story draws its last ones and says how many it left out.
pub const MAX_ROWS: usize = 400;

const ROW_H: usize = 22;
const HEAD_H: usize = 46;
const TIME_W: usize = 78;
const FAULT_W: usize = 18;
const LANE_W: usize = 108;
/// Monospace 12 px: about this many pixels a character, for the page's width.
const CHAR_W: usize = 7;

/// What a row draws on the lanes, `L` naming a lane (a process, then its column).
enum Mark<L> {
    /// A request from one lane to another.
    Arrow { from: L, to: L, fate: Fate },
    /// Something on one lane: a stored write, a reconcile, a note, a start.
    Dot(L),
    /// A process stopped at a failpoint.
    Cross(L),
    /// Nothing on the lanes: a fault's start or end (its band shows it).
    None,
}

impl<L: Copy> Mark<L> {
    fn map<M>(&self, f: impl Fn(L) -> M) -> Mark<M> {
        match *self {
            Mark::Arrow { from, to, fate } => Mark::Arrow {
                from: f(from),
                to: f(to),
                fate,
            },
            Mark::Dot(l) => Mark::Dot(f(l)),
            Mark::Cross(l) => Mark::Cross(f(l)),
            Mark::None => Mark::None,
        }
    }

    fn lanes(&self) -> impl Iterator<Item = L> {
        let (a, b) = match *self {
            Mark::Arrow { from, to, .. } => (Some(from), Some(to)),
            Mark::Dot(l) | Mark::Cross(l) => (Some(l), None),
            Mark::None => (None, None),
        };
        a.into_iter().chain(b)
    }
}

/// What became of a request, from its line's ` => ...`.
#[derive(Clone, Copy, PartialEq)]
enum Fate {
    Ok,
    Refused,
    Unanswered,
}

fn fate(line: &str) -> Fate {
    match line.rsplit_once(" => ") {
        None => Fate::Ok,
        Some((_, answer)) if answer.starts_with("no answer") => Fate::Unanswered,
        Some((_, answer)) if answer.starts_with(|c: char| c.is_ascii_digit()) => Fate::Refused,
        Some(_) => Fate::Ok,
    }
}

/// The page of `e`, a failure explained from `world`'s run; `title` names it (the
/// scenario and seed), `replay` is the command that replays it.
pub fn failure_page(world: &World, e: &Explanation, title: &str, replay: &str) -> String {
    failure_page_capped(world, e, title, replay, MAX_ROWS)
}

/// [`failure_page`] drawing at most `max_rows` rows (its last ones), and saying so.
pub fn failure_page_capped(
    world: &World,
    e: &Explanation,
    title: &str,
    replay: &str,
    max_rows: usize,
) -> String {
    let records = world.sim.trace().records();
    let skipped = e.lines.len().saturating_sub(max_rows);
    let rows: Vec<(usize, &str)> = e
        .records
        .iter()
        .copied()
        .zip(e.lines.iter().map(String::as_str))
        .skip(skipped)
        .collect();
    // What each row draws, by process; the lanes are every process a row draws on, in
    // the order the world made them.
    let by_process: Vec<Mark<ProcId>> = rows
        .iter()
        .map(|&(index, line)| match records.get(index).map(|r| &r.kind) {
            Some(RecordKind::Deliver { from, to, .. }) if line.contains(" -> ") => Mark::Arrow {
                from: *from,
                to: *to,
                fate: fate(line),
            },
            // An answer the story tells (a Lease's new holder): on the writer's lane.
            Some(RecordKind::Deliver { to, .. }) => Mark::Dot(*to),
            Some(RecordKind::Note { proc, .. }) | Some(RecordKind::Start { proc }) => {
                Mark::Dot(*proc)
            }
            Some(RecordKind::Crashed { proc, .. }) => Mark::Cross(*proc),
            _ => Mark::None,
        })
        .collect();
    let lanes: Vec<ProcId> = by_process
        .iter()
        .flat_map(Mark::lanes)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let marks: Vec<Mark<usize>> = by_process
        .iter()
        .map(|m| {
            m.map(|p| {
                lanes
                    .binary_search(&p)
                    .expect("every process a row draws on has a lane")
            })
        })
        .collect();
    let names: Vec<&str> = e
        .objects
        .iter()
        .map(|o| o.split_once(' ').map_or(o.as_str(), |(_, n)| n))
        .collect();

    // Fault bands: the rows each fault was active for (a message fault: its one row).
    let plan = world.sim.plan();
    let times: Vec<SimTime> = rows.iter().map(|&(i, _)| records[i].time).collect();
    let mut bands = Vec::new();
    for (i, f) in plan.faults.iter().enumerate() {
        let start = match &f.on {
            None => Some(SimTime(f.at_ms)),
            Some(_) => world.sim.fired_at(i),
        };
        let Some(start) = start.filter(|s| *s <= e.at) else {
            continue;
        };
        let end = if f.fault.is_message_fault() {
            Some(start)
        } else {
            f.duration_ms.map(|d| start.plus_ms(d))
        };
        let active = end.is_none_or(|end| end > e.at);
        let first = times.partition_point(|t| *t < start);
        // Through the violation row if still active, else through the last row before
        // its end (a message fault: the row at its instant).
        let last = match end {
            _ if active => rows.len(),
            Some(end) if end == start => times.partition_point(|t| *t <= end),
            Some(end) => times.partition_point(|t| *t < end),
            None => rows.len(),
        };
        let what = crate::timeline::fault_words(&f.fault);
        let span = format!(
            "{what}: {start}-{}{}",
            end.map_or("end".to_string(), |e| e.to_string()),
            if active {
                " (active at the violation)"
            } else {
                ""
            }
        );
        bands.push((first, last.max(first + 1), span, active));
    }

    let lanes_x = TIME_W + FAULT_W * bands.len().max(1) + 8;
    let label_x = lanes_x + LANE_W * lanes.len().max(1) + 12;
    let widest = rows
        .iter()
        .map(|(_, l)| label(l).chars().count())
        .max()
        .unwrap_or(0)
        .max(60);
    let width = label_x + widest * CHAR_W + 20;
    let body_rows = rows.len() + 1 + usize::from(skipped > 0);
    let height = HEAD_H + body_rows * ROW_H + 12;
    let lane_x = |c: usize| lanes_x + c * LANE_W + LANE_W / 2;
    let row_y = |r: usize| HEAD_H + (r + usize::from(skipped > 0)) * ROW_H + ROW_H / 2;

    let mut svg = String::with_capacity(256 * (rows.len() + 8));
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="swimlanes of the failure">"#
    );
    svg.push_str(r##"<defs><marker id="head" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="context-stroke"/></marker></defs>"##);
    // Zebra rows, so a label is read against its arrow.
    for r in (0..rows.len()).step_by(2) {
        let _ = write!(
            svg,
            r#"<rect class="zebra" x="0" y="{}" width="{width}" height="{ROW_H}"/>"#,
            row_y(r) - ROW_H / 2
        );
    }
    // Lanes and their heads.
    for (c, p) in lanes.iter().enumerate() {
        let x = lane_x(c);
        let _ = write!(
            svg,
            r#"<g class="lane"><title>{}</title><line x1="{x}" y1="{}" x2="{x}" y2="{}"/><text class="lanehead" x="{x}" y="16">{}</text><text class="lanehost" x="{x}" y="32">@{}</text></g>"#,
            escape(&crate::timeline::who(world, *p)),
            HEAD_H - 6,
            height - 6,
            escape(&short(world.sim.proc_name(*p), 17)),
            escape(&short(world.sim.host_name(world.sim.proc_host(*p)), 16))
        );
    }
    let _ = write!(
        svg,
        r#"<text class="colhead" x="4" y="16">time</text><text class="colhead" x="{}" y="16">faults</text><text class="colhead" x="{label_x}" y="16">what happened (the lines of reconsim explain)</text>"#,
        TIME_W
    );
    // Fault bands.
    for (b, (first, last, span, active)) in bands.iter().enumerate() {
        let x = TIME_W + b * FAULT_W;
        let y0 = row_y(*first) - ROW_H / 2;
        let y1 = if *last >= rows.len() {
            row_y(rows.len()) + ROW_H / 2
        } else {
            row_y(last - 1) + ROW_H / 2
        };
        let _ = write!(
            svg,
            r#"<g class="fault{}"><title>{}</title><rect class="band" x="{x}" y="{y0}" width="{}" height="{}"/><rect class="shade" x="{lanes_x}" y="{y0}" width="{}" height="{}"/></g>"#,
            if *active { " active" } else { "" },
            escape(span),
            FAULT_W - 4,
            y1 - y0,
            label_x - lanes_x - 6,
            y1 - y0
        );
    }
    if skipped > 0 {
        let _ = write!(
            svg,
            r#"<text class="skipped" x="{label_x}" y="{}">{skipped} earlier lines not drawn: reconsim explain lists them all</text>"#,
            HEAD_H + ROW_H / 2 + 4
        );
    }
    // The rows.
    for (r, (&(index, line), mark)) in rows.iter().zip(&marks).enumerate() {
        let y = row_y(r);
        let _ = write!(
            svg,
            r#"<text class="time" x="4" y="{}">{}</text>"#,
            y + 4,
            records[index].time
        );
        match *mark {
            Mark::Arrow { from, to, fate } => {
                let class = match fate {
                    Fate::Ok => "req",
                    Fate::Refused => "req refused",
                    Fate::Unanswered => "req unanswered",
                };
                let (x1, x2) = (lane_x(from), lane_x(to));
                let x2 = if x2 > x1 { x2 - 4 } else { x2 + 4 };
                let _ = write!(
                    svg,
                    r#"<line class="{class}" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" marker-end="url(#head)"/>"#
                );
            }
            Mark::Dot(c) => {
                let class = if line.contains(" reconcile #") {
                    "dot reconcile"
                } else {
                    "dot"
                };
                let _ = write!(
                    svg,
                    r#"<circle class="{class}" cx="{}" cy="{y}" r="4"/>"#,
                    lane_x(c)
                );
            }
            Mark::Cross(c) => {
                let x = lane_x(c);
                let _ = write!(
                    svg,
                    r#"<path class="crash" d="M{},{} l10,10 m0,-10 l-10,10"/>"#,
                    x - 5,
                    y - 5
                );
            }
            Mark::None => {}
        }
        let _ = write!(
            svg,
            r#"<text class="label" x="{label_x}" y="{}">{}</text>"#,
            y + 4,
            marked(&label(line), &names)
        );
    }
    // The violation.
    let y = row_y(rows.len());
    let _ = write!(
        svg,
        r#"<g class="violation"><line x1="{lanes_x}" y1="{y}" x2="{}" y2="{y}"/><text class="time" x="4" y="{}">{}</text><text class="label" x="{label_x}" y="{}">VIOLATION {}</text></g>"#,
        label_x - 6,
        y + 4,
        e.at,
        y + 4,
        escape(
            &e.headline
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(": ")
        )
    );
    svg.push_str("</svg>");

    let mut page = String::with_capacity(svg.len() + 4096);
    let _ = write!(
        page,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{STYLE}</style></head>
<body>
<h1>{title}</h1>
<p class="headline">{headline}</p>
<p class="faults"><b>faults:</b> {faults}</p>
<p class="objects"><b>the objects it names</b> (marked below): {objects}</p>
<p class="legend"><span class="k req">&#8594; request, answered</span> <span class="k refused">&#8594; refused (4xx)</span> <span class="k unanswered">&#8594; no answer</span> <span class="k dot">&#9679; write stored, reconcile, note</span> <span class="k band">&#9646; fault active (hover for which)</span> <span class="k violation">&#8212; the violation</span>. Rows are in order, not to scale.</p>
<div class="lanes">{svg}</div>
<details><summary>the same story as text</summary><pre>{text}</pre></details>
<p class="replay">replay: <code>{replay}</code></p>
</body></html>
"#,
        title = escape(title),
        headline = escape(&e.headline),
        faults = if e.faults.is_empty() {
            "none".to_string()
        } else {
            escape(&e.faults)
        },
        objects = escape(&e.objects.join(", ")),
        text = escape(&e.lines.join("\n")),
        replay = escape(replay),
    );
    page
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:16px;color:#222}\
h1{font-size:18px;margin:0 0 6px}p{margin:4px 0}.headline{white-space:pre-wrap;font-weight:600;color:#a00}\
.lanes{overflow-x:auto;border:1px solid #ddd;margin:10px 0}\
svg text{font:12px ui-monospace,monospace}.zebra{fill:#f6f7f9}\
.lane line{stroke:#b8c0cc;stroke-width:1}.lanehead,.lanehost{text-anchor:middle;font-weight:600;font-size:10px}.lanehost{fill:#667;font-weight:400}\
.colhead{fill:#667}.time{fill:#556}.label{fill:#222}.obj{fill:#0650b8;font-weight:700}\
.req{stroke:#2b6;stroke-width:1.6}.req.refused{stroke:#d80}.req.unanswered{stroke:#c22;stroke-dasharray:4 3}\
.dot{fill:#789}.dot.reconcile{fill:#36c}.crash{stroke:#c22;stroke-width:2}\
.band{fill:#e9a23b}.fault.active .band{fill:#d9531e}.shade{fill:#e9a23b;opacity:.07}\
.violation line{stroke:#c00;stroke-width:2}.violation .label{fill:#c00;font-weight:700}.skipped{fill:#a60}\
.legend .k{margin-right:10px}.legend .req{color:#2b6}.legend .refused{color:#d80}.legend .unanswered{color:#c22}\
.legend .dot{color:#36c}.legend .band{color:#d9531e}.legend .violation{color:#c00}\
pre{font:12px ui-monospace,monospace;white-space:pre-wrap}";

/// A line without its time column (the page has its own).
fn label(line: &str) -> String {
    let t = line.trim_start();
    match t.split_once("  ") {
        Some((time, rest)) if time.ends_with('s') && !time.contains(' ') => rest.to_string(),
        _ => t.to_string(),
    }
}

/// `s` in at most `n` characters: its start, an ellipsis, and its last dash-separated
/// part when short (a replica's generated suffix, which tells two replicas apart).
fn short(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let tail = s
        .rfind('-')
        .map(|i| &s[i..])
        .filter(|t| t.chars().count() <= n / 2)
        .unwrap_or("");
    let head = n - 1 - tail.chars().count();
    let mut out: String = s.chars().take(head).collect();
    out.push('\u{2026}');
    out.push_str(tail);
    out
}

/// `s` escaped for HTML text and attributes.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `line` escaped, each whole-word mention of one of `names` (or `namespace/name`)
/// marked.
fn marked(line: &str, names: &[&str]) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    let mut out = String::with_capacity(line.len() + 32);
    let mut rest = line;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
        if end == 0 {
            let c = rest.chars().next().expect("not empty");
            out.push_str(&escape(&c.to_string()));
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let token = &rest[..end];
        let bare = token.trim_end_matches('.');
        let name = bare.rsplit_once('/').map_or(bare, |(_, n)| n);
        if names.contains(&name) {
            let _ = write!(out, r#"<tspan class="obj">{}</tspan>"#, escape(bare));
            out.push_str(&escape(&token[bare.len()..]));
        } else {
            out.push_str(&escape(token));
        }
        rest = &rest[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Fate, fate, label, marked};

    #[test]
    fn names_are_marked_as_whole_words_and_text_is_escaped() {
        let m = marked("stored Machine ns/web-1 rv 3 <web-10> & web-1.", &["web-1"]);
        assert_eq!(
            m,
            r#"stored Machine <tspan class="obj">ns/web-1</tspan> rv 3 &lt;web-10&gt; &amp; <tspan class="obj">web-1</tspan>."#
        );
    }

    #[test]
    fn a_line_loses_its_time_and_a_request_its_fate() {
        assert_eq!(label("   0.037s  a -> b => ok"), "a -> b => ok");
        assert_eq!(
            super::short("machineset-controller-tjv8z", 17),
            "machineset\u{2026}-tjv8z"
        );
        assert_eq!(
            super::short("machine-controller-0", 17),
            "machine-contro\u{2026}-0"
        );
        assert_eq!(
            super::short("a-very-long-name-without-suffix", 9),
            "a-very-l\u{2026}"
        );
        assert_eq!(super::short("user", 17), "user");
        assert!(fate("a -> create x => ok, rv 3 (at 1s)") == Fate::Ok);
        assert!(fate("a -> create x => 409 Conflict (at 1s)") == Fate::Refused);
        assert!(fate("a -> create x => no answer by 2s") == Fate::Unanswered);
    }
}
