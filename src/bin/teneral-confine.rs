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
    if args.get(1).is_some_and(|a| a == "confine") {
        let status = teneral::confine::helper_main(&args[2..]);
        return ExitCode::from(u8::try_from(status).unwrap_or(1));
    }
    eprintln!(
        "teneral-confine: the kernel runs this as `teneral-confine confine PLAN -- PROGRAM ...` \
         (see teneral::confine::wrap); there is nothing else to do with it"
    );
    ExitCode::from(u8::try_from(teneral::confine::EXIT_USAGE).unwrap_or(1))
}
