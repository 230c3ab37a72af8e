//! The properties every transient unit the kernel asks for carries, a
//! service's and a scope's alike: its description, its limits, how it is
//! stopped, and its bond to the kernel's own unit.

use std::time::Duration;

use zbus::zvariant::Value;

use crate::runner::Limits;

/// The properties of a unit described as `description`, held to `limits`,
/// bound to the kernel's unit `own` when there is one: `MemoryMax`,
/// `TasksMax` and `RuntimeMaxUSec` as far as `limits` has them,
/// `TimeoutStopUSec`, `KillMode=control-group` (a stop ends everything in
/// it) and, when `referenced`, `AddRef` (it stays loaded until the kernel
/// lets it go, and the manager sends its signals to the bus for the
/// kernel). `BindsTo=` and `Before=` the kernel's unit: none outlives the
/// kernel, and on a stop the kernel goes first and stops its children
/// itself.
pub fn common(
    description: String,
    own: Option<&str>,
    limits: &Limits,
    referenced: bool,
) -> Vec<(&'static str, Value<'static>)> {
    let usec = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let mut props: Vec<(&'static str, Value<'static>)> = vec![
        ("Description", Value::from(description)),
        ("KillMode", Value::from("control-group")),
        ("TimeoutStopUSec", Value::from(usec(limits.stop_timeout))),
    ];
    if referenced {
        props.push(("AddRef", Value::from(true)));
    }
    if let Some(own) = own {
        props.push(("BindsTo", Value::from(vec![own.to_owned()])));
        props.push(("Before", Value::from(vec![own.to_owned()])));
    }
    if let Some(bytes) = limits.memory_max {
        props.push(("MemoryMax", Value::from(bytes)));
    }
    if let Some(tasks) = limits.tasks_max {
        props.push(("TasksMax", Value::from(tasks)));
    }
    if let Some(runtime) = limits.runtime_max {
        props.push(("RuntimeMaxUSec", Value::from(usec(runtime))));
    }
    props
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(props: &[(&str, Value<'_>)]) -> Vec<String> {
        props.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    #[test]
    fn each_limit_becomes_the_property_systemd_holds_it_by() {
        let none = Limits {
            memory_max: None,
            tasks_max: None,
            runtime_max: None,
            stop_timeout: Duration::from_secs(5),
            background: false,
        };
        let all = Limits {
            memory_max: Some(256 << 20),
            tasks_max: Some(32),
            runtime_max: Some(Duration::from_millis(1500)),
            stop_timeout: Duration::from_secs(2),
            background: true,
        };
        let base = |stop: &str| {
            vec![
                "Description=\"d\"".to_owned(),
                "KillMode=\"control-group\"".to_owned(),
                format!("TimeoutStopUSec=uint64 {stop}"),
                "AddRef=true".to_owned(),
            ]
        };
        let with = |mut v: Vec<String>, more: &[&str]| {
            v.extend(more.iter().map(|s| s.to_string()));
            v
        };
        let unreferenced = {
            let mut v = base("5000000");
            v.retain(|p| p != "AddRef=true");
            v
        };
        let table: [(&Limits, Option<&str>, bool, Vec<String>); 5] = [
            (&none, None, true, base("5000000")),
            (&none, None, false, unreferenced),
            (
                &none,
                Some("teneral.service"),
                true,
                with(
                    base("5000000"),
                    &["BindsTo=[\"teneral.service\"]", "Before=[\"teneral.service\"]"],
                ),
            ),
            (
                &all,
                None,
                true,
                with(
                    base("2000000"),
                    &[
                        "MemoryMax=uint64 268435456",
                        "TasksMax=uint64 32",
                        "RuntimeMaxUSec=uint64 1500000",
                    ],
                ),
            ),
            (
                &Limits { runtime_max: Some(Duration::MAX), ..none },
                None,
                true,
                with(base("5000000"), &[&format!("RuntimeMaxUSec=uint64 {}", u64::MAX)]),
            ),
        ];
        for (limits, own, referenced, want) in table {
            let got = shown(&common("d".into(), own, limits, referenced));
            assert_eq!(got, want, "{limits:?} {own:?} {referenced}");
        }
    }
}
