//! The unpacker as the kernel runs it: `teneral unpack-organ` in the
//! cage's `unpack` profile, the archive fed on its stdin. It writes its
//! staging directory and nothing beside it (asserted by errno), and an
//! unpacker that lies (says it succeeded but left a fifo, or says it read
//! other than what the kernel fed it) is refused by the kernel's own check.

use std::future::Future;
use std::io::Seek;
use std::path::{Path, PathBuf};
use std::time::Duration;

use teneral::confine::Cage;
use teneral::organs::cache::{self, Cache, TreeError};
use teneral::organs::staged::StagedError;
use teneral::organs::unpacker::{Outcome, Unpacker};
use teneral::runner::{Launch, Limits, Profile, Runner};
use teneral::spawn::{Exit, Spec};

use super::corpus::Place;
use super::tarball::{gz, Tar};
use crate::common::{teneral, TestResult, Within, SLOW};

/// The cage when this Linux can build it; off only where
/// `TENERAL_TEST_NO_CAGE` says this machine lacks it (or runs these tests
/// inside a cage already, where cages do not nest).
pub fn cage() -> Cage {
    let missing = teneral_cage::missing(&[]);
    if missing.is_empty() {
        return Cage::On { exe: teneral(), pretend_missing: vec![] };
    }
    assert!(
        std::env::var_os("TENERAL_TEST_NO_CAGE").is_some(),
        "this Linux lacks {}; set TENERAL_TEST_NO_CAGE=1 only on a machine known to lack it",
        missing.join("; ")
    );
    Cage::Off
}

/// Runs `f` on a runtime of its own whose reaper takes only the children
/// the runner starts.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.expect("a current-thread runtime builds");
    rt.block_on(async {
        teneral::spawn::start_reaper_of_own_children().expect("the reaper starts");
        f.await
    })
}

/// Unpacks `tar` (gzipped here) as the kernel does, into the staging
/// directory of `place`, with `program` as the unpacker; how it ended.
pub fn unpack_in(place: &Place, tar: &[u8], cage: Cage, program: &Path) -> Outcome {
    let file = archive_file(&gz(tar)).expect("the archive is written");
    let runner = Runner::direct(cage);
    let unpacker = Unpacker::new(&runner, program);
    let stage = place.stage();
    let root_len = stage.as_os_str().len();
    let run = unpacker.run("teneral-unpack-test", file.1, place.dir.path(), &stage, root_len);
    let (_, outcome) = block_on(run).expect("the unpacker runs");
    outcome
}

/// `bytes` in a file of a temp directory of its own (never in a place).
fn archive_file(bytes: &[u8]) -> std::io::Result<(tempfile::TempDir, std::fs::File)> {
    let dir = tempfile::Builder::new().prefix("tnl-archive").tempdir()?;
    let path = dir.path().join("a.tar.gz");
    std::fs::write(&path, bytes)?;
    let file = std::fs::File::open(&path)?;
    Ok((dir, file))
}

#[test]
fn the_caged_unpacker_unpacks_what_the_unpacker_unpacks() -> TestResult {
    let tar = Tar::new()
        .dir("pkg/", 0o755)
        .file_mode("pkg/bin/tool", b"#!/bin/sh\n", 0o755)
        .hard_link("pkg/bin/again", "pkg/bin/tool")
        .symlink("pkg/lib", "bin")
        .finish();
    let caged = Place::new()?;
    match unpack_in(&caged, &tar, cage(), &teneral()) {
        Outcome::Said { summary, read } => {
            assert_eq!(summary.entries, 5, "pkg, bin (made for tool), tool, again, lib");
            assert_eq!(read, gz(&tar).len() as u64, "it read all the kernel fed it");
        }
        other => panic!("want a summary, got {other:?}"),
    }
    let here = Place::new()?;
    teneral::organs::unpack::unpack_tar(&tar[..], &here.stage())?;
    assert_eq!(super::listing(&caged.stage()), super::listing(&here.stage()));
    caged.assert_nothing_outside("caged");
    Ok(())
}

/// The errno in an `io::Error`'s text, `(os error N)`, as the unpacker
/// reports a failed write.
fn os_error(text: &str) -> Option<i32> {
    text.split("(os error ").nth(1)?.split(')').next()?.parse().ok()
}

/// The unpacker pointed at a directory beside the one its profile grants:
/// a directory that exists on the host is not there in the cage (ENOENT);
/// the parent the grant is mounted in cannot be opened (EACCES, Landlock:
/// no rule reaches it). Uncaged, the same runs write there: the test bites.
#[test]
fn the_caged_unpacker_writes_nowhere_but_its_staging_directory() -> TestResult {
    if !crate::cage::require_cage()? {
        return Ok(());
    }
    let tar = Tar::new().file("pwned", b"x").finish();
    let place = Place::new()?;
    let (_dir, file) = archive_file(&gz(&tar))?;
    let (granted, beside) = (place.stage(), place.dir.path().join("outside"));
    // `teneral unpack-organ <dest>` in the profile that grants `granted`:
    // its exit status and stderr.
    let try_at = |dest: &Path, cage: Cage| -> (Exit, String) {
        let runner = Runner::direct(cage);
        let mut spec = Spec::new(teneral(), &granted)
            .arg("unpack-organ")
            .arg("--root-len")
            .arg("10")
            .arg("--limit-ms")
            .arg("20000")
            .arg(dest);
        let mut file = file.try_clone().expect("the archive's descriptor is duplicated");
        file.rewind().expect("the archive rewinds");
        spec.stdin = Some(file.into());
        let profile = Profile::Unpack {
            individual: place.dir.path().to_owned(),
            program: teneral(),
            staging: granted.clone(),
        };
        let limits =
            Limits::none(Duration::from_secs(5)).with_runtime_max(Some(Duration::from_secs(60)));
        let launch = Launch::new(spec, limits).caged(profile);
        let (ended, running) =
            block_on(runner.run("teneral-unpack-test", launch)).expect("the unpacker starts");
        (ended.exit, running.stderr_tail())
    };
    for (dest, errno) in [(beside.clone(), 2), (place.dir.path().to_owned(), 13)] {
        let (exit, said) = try_at(&dest, cage());
        assert_eq!(exit, Exit::Code(1), "{}: {said}", dest.display());
        assert!(said.starts_with("cannot write"), "{said}");
        assert_eq!(os_error(&said), Some(errno), "{}: {said}", dest.display());
    }
    place.assert_nothing_outside("caged, told to write beside");
    // The same run into the granted directory works.
    let (exit, said) = try_at(&granted, cage());
    assert_eq!(exit, Exit::Code(0), "{said}");
    assert!(granted.join("pwned").is_file());
    // Without the cage the same unpacker writes beside: the test bites.
    let (exit, said) = try_at(&beside, Cage::Off);
    assert_eq!(exit, Exit::Code(0), "{said}");
    assert!(beside.join("pwned").is_file());
    Ok(())
}

/// A stand-in for the unpacker that reads its stdin, counts it, and lies:
/// `plant` (a shell command run in the staging directory, `$n` the bytes
/// it read) makes what it leaves, and it says it unpacked one entry and
/// read `$n` bytes.
fn liar(dir: &Path, plant: &str) -> std::io::Result<PathBuf> {
    let path = dir.join("liar");
    let script = format!(
        "#!/bin/sh\nfor a; do staging=$a; done\ncd \"$staging\" || exit 9\n\
         n=$(wc -c)\n{plant}\necho \"unpacked 1 0 $n\"\n"
    );
    std::fs::write(&path, script)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// `make_tree` with `program` as the unpacker, in a cache of its own (in
/// the temp directory returned).
fn make_tree_with(program: &Path, archive: &[u8]) -> Result<Made, std::io::Error> {
    let home = tempfile::Builder::new().prefix("tnl-liar").tempdir()?;
    let cache = Cache::new(home.path());
    let sha = cache::hash(archive)?;
    let (_dir, file) = archive_file(archive)?;
    let runner = Runner::direct(cage());
    let unpacker = Unpacker::new(&runner, program);
    let made = block_on(cache::make_tree(&cache, &sha, file, &unpacker));
    Ok((home, cache, made))
}

type Made = (tempfile::TempDir, Cache, Result<PathBuf, TreeError>);

fn trees_left(cache: &Cache) -> Vec<String> {
    std::fs::read_dir(cache.root.join("trees"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn an_unpacker_that_lies_is_refused_by_the_kernels_check() -> TestResult {
    let archive = gz(&Tar::new().file("ok", b"x").finish());
    let scripts = tempfile::tempdir()?;
    // Says it succeeded, leaves a fifo.
    let program = liar(scripts.path(), "mkfifo pipe || exit 8")?;
    let (_home, cache, made) = make_tree_with(&program, &archive)?;
    match made {
        Err(TreeError::Staged(StagedError::Kind { name, kind })) => {
            assert_eq!((name.as_str(), kind), ("pipe", "fifo"));
        }
        other => panic!("want the fifo refused, got {other:?}"),
    }
    assert_eq!(trees_left(&cache), Vec::<String>::new(), "no tree and no staging directory");
    // Says it read less than the kernel fed it, or more.
    let len = archive.len() as u64;
    for said in [len - 1, len + 1] {
        let program = liar(scripts.path(), &format!("n={said}"))?;
        let (_home, cache, made) = make_tree_with(&program, &archive)?;
        match made {
            Err(TreeError::Misreported { said: s, given, len: l }) => {
                assert_eq!((s, given, l), (said, len, len));
            }
            other => panic!("want the count refused, got {other:?}"),
        }
        assert_eq!(trees_left(&cache), Vec::<String>::new());
    }
    // Stops reading early and says it read everything.
    // Bytes gzip cannot shrink: more than the pipe holds.
    let mut x = 1u32;
    let noise: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    let big = gz(&Tar::new().file("big", &noise).finish());
    let program = liar(scripts.path(), &format!("n={}", big.len()))?;
    let script = std::fs::read_to_string(&program)?.replace("n=$(wc -c)", "n=0");
    std::fs::write(&program, script)?;
    let (_home, cache, made) = make_tree_with(&program, &big)?;
    match made {
        Err(TreeError::Misreported { said, given, len }) => {
            assert_eq!((said, len), (big.len() as u64, big.len() as u64));
            assert!(given < len, "the kernel wrote {given} of {len} bytes into the pipe");
        }
        other => panic!("want the count refused, got {other:?}"),
    }
    assert_eq!(trees_left(&cache), Vec::<String>::new());
    // Honest about an empty tree: accepted (the liar's check is what bites).
    let program = liar(scripts.path(), "")?;
    let (_home, cache, made) = make_tree_with(&program, &archive)?;
    let tree = made?;
    assert!(tree.is_dir() && trees_left(&cache).len() == 1);
    Ok(())
}

#[test]
fn the_kernel_stops_an_unpacker_past_its_limit_and_keeps_no_tree() -> TestResult {
    let archive = gz(&Tar::new().file("a", b"1").finish());
    let home = tempfile::tempdir()?;
    let cache = Cache::new(home.path());
    let sha = cache::hash(&archive[..])?;
    let (_dir, file) = archive_file(&archive)?;
    let runner = Runner::direct(cage());
    let program = teneral();
    let unpacker = Unpacker { limit: Duration::ZERO, ..Unpacker::new(&runner, &program) };
    match block_on(cache::make_tree(&cache, &sha, file, &unpacker)) {
        Err(TreeError::Refused(said)) => {
            assert!(said.starts_with("unpacking stopped at entry \"a\""), "{said}")
        }
        other => panic!("want a time-out, got {other:?}"),
    }
    assert_eq!(trees_left(&cache), Vec::<String>::new());
    Ok(())
}

/// The kernel's unpacking through each backend it may choose: its own
/// child, a child in a cgroup of its own (where this machine lets the
/// kernel make one), and a transient unit of the user manager (under
/// `scripts/with-systemd`, which sets `TENERAL_TEST_SYSTEMD=1`). The
/// archive reaches the unpacker's stdin under each, and the tree is whole.
#[test]
fn the_caged_unpacker_reads_its_stdin_under_every_runner() -> TestResult {
    use teneral::runner::cgroup::Delegated;
    let tar = Tar::new().file_mode("tool/bin/x", b"#!/bin/sh\n", 0o755).finish();
    let archive = gz(&tar);
    // One runtime for all: the user manager's connection lives in the one
    // it was made in.
    block_on(async {
        let mut runners = vec![("direct", Runner::direct(cage()))];
        match Delegated::find() {
            Ok(delegated) => runners.push(("cgroup", Runner::cgroup(delegated, cage()))),
            Err(why) => eprintln!("the cgroup runner is not tried here: {why}"),
        }
        if std::env::var("TENERAL_TEST_SYSTEMD").as_deref() == Ok("1") {
            let choice = teneral::settings::RunnerChoice::Systemd;
            runners.push(("systemd", Runner::choose(choice, cage()).await?));
        } else {
            eprintln!("the systemd runner is not tried here (scripts/with-systemd tries it)");
        }
        for (name, runner) in &runners {
            let home = tempfile::Builder::new().prefix("tnl-runner").tempdir()?;
            let cache = Cache::new(home.path());
            let sha = cache::hash(&archive[..])?;
            let (_dir, file) = archive_file(&archive)?;
            let program = teneral();
            let unpacker = Unpacker::new(runner, &program);
            let tree = cache::make_tree(&cache, &sha, file, &unpacker)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            assert_eq!(
                super::listing(&tree),
                ["tool d 755", "tool/bin d 755", "tool/bin/x f 755 #!/bin/sh\n"],
                "{name}"
            );
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}

/// Set for the child half of the zygote's test.
const ZYGOTE_CHILD: &str = "TENERAL_TEST_UNPACK_THROUGH_ZYGOTE";

/// The child's half: with the cage's zygote started as the kernel starts
/// it, the unpacking goes through it, the archive on fd 0 of the request.
/// A process of its own, since the zygote takes every confined launch of
/// its process.
#[test]
fn child_unpacks_through_the_zygote() {
    if std::env::var_os(ZYGOTE_CHILD).is_none() {
        return; // Run by the parent test only.
    }
    let archive = gz(&Tar::new().file("tool/x", b"through").finish());
    let made = block_on(async {
        let cage = Cage::On { exe: teneral(), pretend_missing: vec![] };
        assert!(cage.start_zygote().expect("the zygote starts"), "no teneral-confine beside");
        let before = teneral::spawn::zygote_launches();
        let home = tempfile::Builder::new().prefix("tnl-zygote").tempdir().expect("a home");
        let cache = Cache::new(home.path());
        let sha = cache::hash(&archive[..]).expect("hashed");
        let (_dir, file) = archive_file(&archive).expect("the archive is written");
        let runner = Runner::direct(cage);
        let program = teneral();
        let tree = cache::make_tree(&cache, &sha, file, &Unpacker::new(&runner, &program)).await;
        let launches = teneral::spawn::zygote_launches() - before;
        let listing = tree.map(|t| super::listing(&t)).map_err(|e| e.to_string());
        (launches, listing)
    });
    println!("\nZYGOTE {made:?}");
}

#[test]
fn the_unpacker_is_launched_through_the_zygote_when_the_kernel_has_one() -> TestResult {
    if !crate::cage::require_cage()? {
        return Ok(());
    }
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new("timeout")
        .arg("120")
        .arg(exe)
        .args(["organs::caged::child_unpacks_through_the_zygote", "--exact", "--nocapture"])
        .args(["--test-threads=1"])
        .env(ZYGOTE_CHILD, "1")
        .output_within(SLOW)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("ZYGOTE ")).ok_or_else(|| {
        format!("the child said nothing: {stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    })?;
    let want = r#"(1, Ok(["tool d 755", "tool/x f 644 through"]))"#;
    assert_eq!(line, want);
    Ok(())
}
