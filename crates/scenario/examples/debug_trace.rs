use reconsim_scenario::{faults, library, runner};
use reconsim_sim::{RecordKind, TraceMode};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (_, s) = library::load(&args[1]).unwrap();
    let seed: u64 = args[2].parse().unwrap();
    let plan = faults::generate(&s, seed);
    println!("{}", serde_json::to_string(&plan).unwrap());
    let (o, w) = runner::run_world(&s, seed, plan, TraceMode::Full);
    println!("{:?}", o.violation);
    for r in w.sim.trace().records() {
        let name = |p: reconsim_sim::ProcId| w.sim.proc_name(p).to_string();
        match &r.kind {
            RecordKind::Deliver { from, to, msg } => {
                let m = format!("{msg:?}");
                if std::env::var("ALL").is_ok()
                    || (to.0 == 1 || from.0 == 1) && !m.contains("Timer")
                    || m.contains("Machine {") && m.contains("Api(") && !m.contains("List")
                {
                    println!(
                        "{} {} -> {}: {}",
                        r.time,
                        name(*from),
                        name(*to),
                        &m[..m.len().min(300)]
                    );
                }
            }
            RecordKind::Fault {
                index,
                active,
                applied,
            } => println!("{} FAULT {index} {active} {applied}", r.time),
            RecordKind::Note { proc, text } => println!("{} NOTE {}: {text}", r.time, name(*proc)),
            _ => {}
        }
    }
}
