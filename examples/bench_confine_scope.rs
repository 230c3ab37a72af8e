//! Where a scope's adoption spends its time, under a user manager
//! (`scripts/with-systemd cargo run --release --example bench_confine_scope
//! -- N`): N starts of a transient scope that adopts a waiting process
//! (`StartTransientUnit` with `PIDs=` and the properties a gate check's
//! scope has), in batches of 10 with the connection subscribed to the
//! manager's signals (`Subscribe`) and not, taking turns. For each start,
//! from the call: the reply, the process's `/proc/PID/cgroup` naming the
//! scope in its first hierarchy and in the last (read every 20 µs on a
//! thread of its own: the manager moves it into one after another), and
//! the job's `JobRemoved` (which the manager sends the client that asked
//! for the job, subscribed or not); the medians of each kind of batch.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use zbus::zvariant::Value;

use teneral::runner::systemd::ManagerProxy;

const BATCH: usize = 10;

#[derive(Default)]
struct Times {
    reply: Vec<f64>,
    moved: Vec<f64>,
    moved_all: Vec<f64>,
    removed: Vec<f64>,
}

fn main() -> Result<()> {
    let runs: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(60);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    rt.block_on(measure(runs))
}

/// The kinds of batch, taking turns: subscribed to the manager's signals
/// or not, and the scope asked for with `AddRef` (the manager then sends
/// the scope's own signals to the bus for its holder) or not.
const KINDS: [(&str, bool, bool); 3] = [
    ("subscribed, AddRef", true, true),
    ("not subscribed, AddRef", false, true),
    ("neither", false, false),
];

async fn measure(runs: usize) -> Result<()> {
    let conn = zbus::Connection::session().await.context("no session bus")?;
    let manager = ManagerProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await?;
    let mut removed = manager.receive_job_removed().await?;
    let mut times: Vec<Times> = KINDS.iter().map(|_| Times::default()).collect();
    let mut heard = vec![0; KINDS.len()];
    let mut round = 0;
    while round < runs {
        let kind = (round / BATCH) % KINDS.len();
        let (_, subscribe, add_ref) = KINDS[kind];
        if subscribe {
            manager.subscribe().await?;
        }
        for _ in 0..BATCH.min(runs - round) {
            if once(&conn, &manager, &mut removed, round, add_ref, &mut times[kind]).await? {
                heard[kind] += 1;
            }
            round += 1;
        }
        if subscribe {
            conn.call_method(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.systemd1.Manager"),
                "Unsubscribe",
                &(),
            )
            .await?;
        }
    }
    println!("scope adoption, ms from the call (median of each; load {})", load());
    for (((name, _, _), t), heard) in KINDS.iter().zip(&mut times).zip(heard) {
        println!(
            "  {name:<23} reply {:6.3}  first hierarchy moved {:6.3}  last {:6.3}  \
             JobRemoved {:6.3}  ({} starts, JobRemoved heard for {heard})",
            median(&mut t.reply),
            median(&mut t.moved),
            median(&mut t.moved_all),
            median(&mut t.removed),
            t.reply.len()
        );
    }
    Ok(())
}

/// One adoption; whether its `JobRemoved` was heard (within 1 s).
async fn once(
    conn: &zbus::Connection,
    manager: &ManagerProxy<'static>,
    removed: &mut teneral::runner::systemd::JobRemovedStream,
    round: usize,
    add_ref: bool,
    times: &mut Times,
) -> Result<bool> {
    let mut child = Command::new("/bin/cat").stdin(Stdio::piped()).stdout(Stdio::null()).spawn()?;
    let pid = child.id();
    let name = format!("teneral-gate-probe-{}-{round}.scope", std::process::id());
    let usec = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let props: Vec<(&str, Value<'_>)> = vec![
        ("Description", Value::from(format!("teneral: {name}"))),
        ("KillMode", Value::from("control-group")),
        ("TimeoutStopUSec", Value::from(usec(Duration::from_secs(5)))),
        ("AddRef", Value::from(add_ref)),
        ("MemoryMax", Value::from(1u64 << 30)),
        ("TasksMax", Value::from(512u64)),
        ("RuntimeMaxUSec", Value::from(usec(Duration::from_secs(60)))),
        ("PIDs", Value::from(vec![pid])),
    ];
    let aux: &[(&str, &[(&str, Value<'_>)])] = &[];
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    // When each count of the process's hierarchies naming the scope was
    // first seen: the manager moves it into one hierarchy after another.
    let poll = {
        let stop = stop.clone();
        let want = name.clone();
        std::thread::spawn(move || {
            let path = format!("/proc/{pid}/cgroup");
            let mut seen: Vec<(usize, Duration)> = Vec::new();
            let until = start + Duration::from_secs(2);
            loop {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let count = text.lines().filter(|l| l.contains(&want)).count();
                if seen.last().map_or(count > 0, |(c, _)| *c != count) {
                    seen.push((count, start.elapsed()));
                }
                if (stop.load(Ordering::Relaxed) && count > 0) || Instant::now() > until {
                    return seen;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        })
    };
    let job = manager.start_transient_unit(&name, "fail", &props, aux).await?;
    times.reply.push(ms(start.elapsed()));
    let wait = async {
        while let Some(signal) = removed.next().await {
            let args = signal.args()?;
            if args.job().as_str() == job.as_str() {
                if *args.result() != "done" {
                    bail!("{name}: the job ended {}", args.result());
                }
                return Ok::<_, anyhow::Error>(start.elapsed());
            }
        }
        bail!("the bus connection ended")
    };
    let heard = match tokio::time::timeout(Duration::from_secs(1), wait).await {
        Ok(took) => {
            times.removed.push(ms(took?));
            true
        }
        Err(_) => false,
    };
    stop.store(true, Ordering::Relaxed);
    let seen = poll.join().unwrap_or_default();
    let (Some((_, first)), Some((_, all))) = (seen.first(), seen.last()) else {
        bail!("{name}: the process never showed the scope's cgroup (heard {heard})");
    };
    times.moved.push(ms(*first));
    times.moved_all.push(ms(*all));
    // Its input closed, `cat` ends.
    drop(child.stdin.take());
    child.wait()?;
    let unref = zbus::Message::method_call(teneral::runner::systemd::unit_path(&name), "Unref")?
        .destination("org.freedesktop.systemd1")?
        .interface("org.freedesktop.systemd1.Unit")?
        .with_flags(zbus::message::Flags::NoReplyExpected)?
        .build(&())?;
    if add_ref {
        conn.send(&unref).await?;
    }
    Ok(heard)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
