//! A transient scope unit that adopts a launch the cage's zygote forked: the
//! manager does not start the process (a service's exec of the helper costs
//! what the zygote saves), it takes a running one into a unit of its own
//! (`StartTransientUnit` with `PIDs=`) with the same limits and name a
//! service would have had.
//!
//! The launch is held (`teneral_cage::zygote::HOLD`) until the manager has
//! moved it into the scope: only then does the kernel write the scope's
//! `cgroup.procs` files ([`procs_files`], read from where the manager put
//! the adopted process) to the hold, and the launch's first process enters
//! them before it runs anything. That first process matters when the
//! launch was made ahead (a spare): the manager moves the pid it is given,
//! the helper, and not the cage's first process the helper had already
//! forked.
//!
//! The process stays the kernel's child: the kernel reaps it and keeps its
//! runtime limit as for a direct launch; the scope holds `MemoryMax`,
//! `TasksMax` and `RuntimeMaxSec` and is bound to the kernel's own unit.
//! The kernel holds no reference to it (no `AddRef`, see [`ask`]): it is
//! unloaded once the manager has seen it empty, a failed one once the
//! kernel has read its result and had its failure forgotten
//! ([`Scope::release`]). A killed kernel's launches die with it (their
//! parent-death signal), so the emptied scope is unloaded.
//!
//! On a start's path are two exchanges with the manager: the
//! `StartTransientUnit` call, and its job's end (`JobRemoved`, which the
//! manager sends the client that asked for the job, subscribed or not),
//! after the job moved the process into the scope. No answer, or no end,
//! within [`ADOPT_WITHIN`] is a start that failed, named with the unit's
//! state. The release after the launch's end waits for no answer,
//! and a launch of the same name right after waits only for the manager to
//! have seen the last one's end ([`Systemd::ask_for`]): a scope is active
//! until the manager learns its cgroup is empty, a moment after its last
//! process exited.

use std::path::{Path, PathBuf};
use std::time::Duration;

use zbus::zvariant::Value;

use super::{properties, Systemd, SystemdError};
use crate::runner::Limits;

/// A scope that adopted a launch.
pub struct Scope {
    pub name: String,
    systemd: Systemd,
}

impl Scope {
    /// Has the manager adopt process `pid` into scope `name` with `limits`;
    /// returns once the start job is done (the process is in the scope). A
    /// job that ends otherwise, or no answer or no end within
    /// [`ADOPT_WITHIN`], is a scope that did not start, named with its
    /// state.
    pub async fn adopt(
        systemd: &Systemd,
        name: &str,
        pid: u32,
        limits: &Limits,
    ) -> Result<Scope, SystemdError> {
        // Watch first, then ask: the job's end cannot come unheard.
        let jobs = systemd.jobs.watch(name);
        let started = tokio::time::timeout(ADOPT_WITHIN, async {
            let job = systemd.ask_for(name, || ask(systemd, name, pid, limits)).await?;
            jobs.ended(job.as_str()).await
        })
        .await;
        drop(jobs);
        let scope = Scope { name: name.to_owned(), systemd: systemd.clone() };
        let (result, unit_result) = match started {
            Ok(Ok(result)) if result == "done" => return Ok(scope),
            Ok(Ok(result)) => (result, "the scope did not adopt the launch".to_owned()),
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                let state = systemd
                    .property(name, "org.freedesktop.systemd1.Unit", "ActiveState")
                    .await
                    .ok()
                    .and_then(|v| v.downcast_ref::<String>().ok())
                    .unwrap_or_else(|| "not loaded".to_owned());
                (
                    format!("no end within {} s", ADOPT_WITHIN.as_secs()),
                    format!("the scope is {state}, without the launch"),
                )
            }
        };
        scope.kill_and_release().await;
        Err(SystemdError::StartFailed { unit: name.to_owned(), result, unit_result })
    }

    /// Sends `signal` to every process in the scope.
    pub async fn signal(&self, signal: i32) {
        let _ = self.systemd.kill(&self.name, signal).await;
    }

    /// The scope's `Result` (`success`, `oom-kill`, `timeout`, ...), when
    /// the manager still has it.
    pub async fn result(&self) -> Option<String> {
        let value =
            self.systemd.property(&self.name, "org.freedesktop.systemd1.Scope", "Result").await;
        value.ok().and_then(|v| v.downcast_ref::<String>().ok())
    }

    /// Lets the scope go once the launch has ended, without waiting for
    /// the manager: a failed one's failure is forgotten, so it is unloaded
    /// as an ended scope is ([`Systemd::forget_failure`]). Nothing is left
    /// to end in it: the launch's helper has been reaped, and the cage's
    /// PID namespace ended with its first process.
    pub async fn release(&self, failed: bool) {
        if failed {
            self.systemd.forget_failure(&self.name).await;
        }
    }

    /// Ends everything in the scope, then lets it go.
    pub async fn kill_and_release(&self) {
        let _ = self.systemd.kill(&self.name, super::sigkill()).await;
        self.systemd.forget_failure(&self.name).await;
    }

    /// The `cgroup.procs` files of the cgroups process `pid` is in (after
    /// [`Scope::adopt`]: the scope's), one a line, for the launch's hold.
    pub fn procs_of(pid: u32) -> std::io::Result<String> {
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let files = procs_files(&cgroup, &mountinfo);
        if files.is_empty() {
            return Err(std::io::Error::other(format!(
                "no mounted cgroup hierarchy holds process {pid}; mount the cgroup tree at \
                 /sys/fs/cgroup"
            )));
        }
        let lines: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        Ok(lines.join("\n"))
    }
}

/// The scope's name for a launch named `unit` (`teneral-gate-abc-x.service`
/// is adopted as `teneral-gate-abc-x.scope`).
pub fn scope_name(unit: &str) -> String {
    format!("{}.scope", unit.strip_suffix(".service").unwrap_or(unit))
}

/// Whether launch `unit` is adopted by a scope rather than started as a
/// service: every launch the zygote forks, but a generation's body, whose
/// service unit's main process is what the owner's commands and
/// `systemctl status` name (its start comes once a generation).
pub fn adopts(unit: &str, through_zygote: bool) -> bool {
    through_zygote && !unit.starts_with("teneral-gen-")
}

/// The `cgroup.procs` file of every hierarchy a process is in, from the
/// text of its `/proc/<pid>/cgroup` and of `/proc/self/mountinfo`: each
/// line `id:controllers:path` is found in the mount of its hierarchy
/// (`cgroup2` for id 0; a `cgroup` mount whose options name each of the
/// line's controllers, or its `name=`), the first mount point of it and,
/// of the mounts stacked there, the last; the directory is that point and
/// the path below the mount's root. Hierarchies not mounted, or mounted
/// from a root the path is not below, are left out.
pub fn procs_files(proc_cgroup: &str, mountinfo: &str) -> Vec<PathBuf> {
    let mounts: Vec<(&str, &str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            Some((*left.get(3)?, *left.get(4)?, *right.first()?, right.get(2).copied()?))
        })
        .collect();
    let mut out = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let hierarchy = |fstype: &str, options: &str| {
            if id == "0" {
                return fstype == "cgroup2";
            }
            fstype == "cgroup"
                && !ctrls.is_empty()
                && ctrls.split(',').all(|c| options.split(',').any(|o| o == c))
        };
        let mut found: Option<(&str, &str)> = None;
        for &(root, point, fstype, options) in &mounts {
            if !hierarchy(fstype, options) || found.is_some_and(|(_, first)| first != point) {
                continue;
            }
            found = Some((root, point));
        }
        let Some((root, point)) = found else { continue };
        let below = if root == "/" { Some(path) } else { path.strip_prefix(root) };
        let Some(below) = below.filter(|b| b.is_empty() || b.starts_with('/')) else { continue };
        let dir = Path::new(point).join(below.trim_start_matches('/'));
        let file = dir.join("cgroup.procs");
        if !out.contains(&file) {
            out.push(file);
        }
    }
    out
}

/// How long a start waits for the manager to adopt its launch.
pub const ADOPT_WITHIN: Duration = Duration::from_secs(10);

/// Asks the manager for the scope; the job's path.
async fn ask(
    systemd: &Systemd,
    name: &str,
    pid: u32,
    limits: &Limits,
) -> Result<zbus::zvariant::OwnedObjectPath, SystemdError> {
    // No `AddRef`: the manager would send the scope's signals (its
    // creation and each change of its properties) to the bus for the
    // kernel, before it runs the job that moves the process.
    let own = systemd.own_unit.as_deref();
    let mut props = properties::common(systemd.describe(name), own, limits, false);
    props.push(("PIDs", Value::from(vec![pid])));
    let aux: &[(&str, &[(&str, Value<'_>)])] = &[];
    match systemd.manager.start_transient_unit(name, "fail", &props, aux).await {
        Ok(job) => Ok(job),
        Err(zbus::Error::MethodError(error, _, _))
            if error.as_str() == "org.freedesktop.systemd1.UnitExists" =>
        {
            Err(SystemdError::Exists { unit: name.to_owned() })
        }
        Err(zbus::Error::MethodError(error, message, _)) => Err(SystemdError::Refused {
            unit: name.to_owned(),
            message: message.unwrap_or_else(|| error.to_string()),
        }),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
33 30 0:29 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
";

    fn files(proc_cgroup: &str, mountinfo: &str) -> Vec<String> {
        procs_files(proc_cgroup, mountinfo).iter().map(|p| p.display().to_string()).collect()
    }

    #[test]
    fn each_hierarchy_of_the_process_is_found_in_its_mount() {
        let scope = "/user.slice/user-0.slice/user@0.service/app.slice/teneral-gate-x.scope";
        let proc_cgroup = format!(
            "12:pids:{scope}\n6:memory:{scope}\n4:cpu,cpuacct:/\n1:name=systemd:{scope}\n\
             0::{scope}\n3:blkio:/\n"
        );
        let got = files(&proc_cgroup, HYBRID);
        let want = [
            format!("/sys/fs/cgroup/pids{scope}/cgroup.procs"),
            format!("/sys/fs/cgroup/memory{scope}/cgroup.procs"),
            "/sys/fs/cgroup/cpu,cpuacct/cgroup.procs".to_owned(),
            format!("/sys/fs/cgroup/systemd{scope}/cgroup.procs"),
            format!("/sys/fs/cgroup/unified{scope}/cgroup.procs"),
        ];
        assert_eq!(got, want, "blkio is not mounted, so it is left out");
    }

    #[test]
    fn a_mount_of_part_of_a_hierarchy_and_mounts_stacked_on_it_are_read_as_the_kernel_shows_them() {
        let table: [(&str, &str, &[&str]); 4] = [
            // cgroup v2 alone.
            (
                "0::/a/b.scope\n",
                "40 1 0:40 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                &["/sys/fs/cgroup/a/b.scope/cgroup.procs"],
            ),
            // A container's mount of its own part of the hierarchy.
            (
                "0::/machine/c1/a.scope\n",
                "40 1 0:40 /machine/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                &["/sys/fs/cgroup/a.scope/cgroup.procs"],
            ),
            // A path outside the mount's root cannot be reached.
            (
                "0::/elsewhere\n",
                "40 1 0:40 /machine/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                &[],
            ),
            // A read-only mount with a writable part bound over it: the last counts.
            (
                "6:memory:/k/x.scope\n",
                "33 30 0:29 / /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n\
                 50 33 0:29 /k /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                 51 1 0:29 / /elsewhere rw - cgroup cgroup rw,memory\n",
                &["/sys/fs/cgroup/memory/x.scope/cgroup.procs"],
            ),
        ];
        for (proc_cgroup, mountinfo, want) in table {
            assert_eq!(files(proc_cgroup, mountinfo), want, "{proc_cgroup}");
        }
    }

    #[test]
    fn every_launch_the_zygote_forks_is_adopted_but_a_generations_body() {
        let table = [
            ("teneral-gate-abc1234-kernel-tests.service", true, true),
            ("teneral-build-abc1234-check-x.service", true, true),
            ("teneral-gate-abc1234-kernel-tests.service", false, false),
            ("teneral-gen-abc1234.service", true, false),
        ];
        for (unit, through_zygote, want) in table {
            assert_eq!(adopts(unit, through_zygote), want, "{unit} {through_zygote}");
        }
        assert_eq!(scope_name("teneral-gate-a-b.service"), "teneral-gate-a-b.scope");
    }
}
