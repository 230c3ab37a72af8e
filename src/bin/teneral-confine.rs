//! The cage's helper as a program of its own: `teneral-confine confine
//! [plan] -- program args...` does exactly what `teneral confine` does
//! (`teneral::confine::helper_main`), but links only the cage's code. The
//! whole kernel loads TLS and git libraries and has tens of thousands of
//! relocations to apply before its `main`, about 2.5 ms of CPU per start
//! (`perf stat`), which every confined start paid; this program does not.
//! The kernel uses it when it lies beside `teneral`
//! (`confine::host::helper_program`), else `teneral confine`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let usage = ExitCode::from(u8::try_from(teneral::confine::EXIT_USAGE).unwrap_or(1));
    if args.get(1).is_some_and(|a| a == "confine") {
        let mut plan = &args[2..];
        // The kernel names its sources; a helper left from other sources
        // (a build of `--bin teneral` alone) confines nothing for it.
        if plan.first().is_some_and(|a| a == "--source") {
            let given = plan.get(1).map(|s| s.to_string_lossy()).unwrap_or_default();
            if given != teneral::confine::host::SOURCE_ID {
                eprintln!(
                    "teneral-confine: built from other sources ({}) than the kernel that runs it ({given}); build both programs again: cargo build --bins",
                    teneral::confine::host::SOURCE_ID
                );
                return usage;
            }
            plan = &plan[2.min(plan.len())..];
        }
        let status = teneral::confine::helper_main(plan);
        return ExitCode::from(u8::try_from(status).unwrap_or(1));
    }
    // `teneral-confine zygote --source ID`: kept by the kernel, forking
    // each confined launch (teneral::confine::zygote).
    if args.get(1).is_some_and(|a| a == "zygote") {
        let given = match &args[2..] {
            [flag, id] if flag == "--source" => id.to_string_lossy(),
            _ => {
                eprintln!(
                    "teneral-confine: the kernel runs this as `teneral-confine zygote --source ID`"
                );
                return usage;
            }
        };
        if given != teneral::confine::host::SOURCE_ID {
            eprintln!(
                "teneral-confine: built from other sources ({}) than the kernel that runs it \
                 ({given}); build both programs again: cargo build --bins",
                teneral::confine::host::SOURCE_ID
            );
            return usage;
        }
        let status = teneral::confine::zygote_main();
        return ExitCode::from(u8::try_from(status).unwrap_or(1));
    }
    eprintln!(
        "teneral-confine: the kernel runs this as `teneral-confine confine PLAN -- PROGRAM ...` \
         (see teneral::confine::wrap); there is nothing else to do with it"
    );
    usage
}
