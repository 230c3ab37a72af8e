//! The helper's Landlock step: the plan's rules as one ruleset, every right
//! of ABI 3 handled (so truncation is controlled too) and both scopes of
//! ABI 6 (no signal to, no abstract socket of, a process outside the cage),
//! required rather than attempted: anything the running Linux cannot
//! enforce is an error naming it.

use landlock::{
    Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::plan::{self, Plan};

const FS: ABI = ABI::V3;
const SCOPES: ABI = ABI::V6;

fn rights(access: plan::Access, is_dir: bool) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let rights = match access {
        plan::Access::Read => read,
        plan::Access::Exec => read | AccessFs::Execute,
        plan::Access::Write => AccessFs::from_all(FS),
        plan::Access::Consume => read | AccessFs::RemoveFile,
        plan::Access::ReadWrite => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
        plan::Access::List => AccessFs::ReadDir.into(),
    };
    if is_dir {
        rights
    } else {
        rights & AccessFs::from_file(FS)
    }
}

/// Restricts this process (and what it will execute) to `plan`'s rules.
/// `no_new_privs` is set here only when the process lacks CAP_SYS_ADMIN,
/// which Landlock then requires.
pub fn restrict(plan: &Plan, no_new_privs: bool) -> Result<(), String> {
    if plan.pretend_missing.iter().any(|f| f == "landlock") {
        return Err(format!(
            "this Linux offers no Landlock (pretended by TENERAL_TEST_PRETEND_MISSING); \
             the cage needs ABI {}",
            crate::LANDLOCK_ABI
        ));
    }
    let lacks = |e: &dyn std::fmt::Display| {
        format!(
            "{e}; the cage needs Landlock ABI {} and this Linux offers ABI {}",
            crate::LANDLOCK_ABI,
            crate::sys::landlock_abi()
        )
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(FS))
        .and_then(|r| r.scope(Scope::from_all(SCOPES)))
        .and_then(|r| r.create())
        .map_err(|e| lacks(&e))?;
    for rule in &plan.rules {
        let fd = PathFd::new(&rule.path)
            .map_err(|e| format!("cannot open {} for a rule: {e}", rule.path.display()))?;
        // The kind of what was opened, not of what the path names by now.
        let is_dir = rustix::fs::fstat(&fd)
            .map(|st| {
                rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
            })
            .map_err(|e| format!("cannot stat {}: {e}", rule.path.display()))?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights(rule.access, is_dir)))
            .map_err(|e| format!("the rule for {}: {e}", rule.path.display()))?;
    }
    let status = ruleset.no_new_privs(no_new_privs).restrict_self().map_err(|e| lacks(&e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(lacks(&format!("the ruleset is {:?}", status.ruleset)));
    }
    Ok(())
}
