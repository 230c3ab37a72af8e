//! The cage's helper as a program of its own: `teneral-confine confine
//! [plan] -- program args...` does exactly what `teneral confine` does, and
//! `teneral-confine zygote` is the cage's zygote. It links only the cage
//! (`teneral_cage`), none of the kernel: the whole kernel loads TLS and git
//! libraries and has tens of thousands of relocations to apply before its
//! `main`, about 2.5 ms of CPU per start (`perf stat`), which every confined
//! start paid; this program does not. The kernel uses it when it lies
//! beside `teneral` (`confine::host::helper_program`), else `teneral
//! confine`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    ExitCode::from(u8::try_from(teneral_cage::program(&args)).unwrap_or(1))
}
