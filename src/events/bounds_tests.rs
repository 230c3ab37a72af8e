use super::*;

fn limits(line: usize, buffered: usize) -> Bounds {
    Bounds { line, buffered, ..Bounds::CHANNEL }
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build();
    rt.map(|rt| rt.block_on(f)).unwrap_or_else(|e| unreachable!("no runtime: {e}"))
}

/// What a connection that sent `input` yields, as text.
fn lines_of(input: &[u8], limits: Bounds, budget: &Budget) -> Vec<String> {
    run(async {
        let mut lines = Lines::new(input, budget, limits);
        let mut out = Vec::new();
        loop {
            match lines.next().await {
                Next::Line(l) => out.push(String::from_utf8_lossy(&l.bytes).into_owned()),
                Next::Closed => return out,
                Next::Refused(why) => {
                    out.push(format!("refused: {why}"));
                    return out;
                }
            }
        }
    })
}

#[test]
fn lines_table() {
    let big = "x".repeat(200_000);
    let table: Vec<(Vec<u8>, Bounds, Vec<String>)> = vec![
        (b"a\nbc\n".to_vec(), limits(10, 1000), vec!["a".into(), "bc".into()]),
        (b"a\n\nb".to_vec(), limits(10, 1000), vec!["a".into(), String::new()]),
        (b"0123456789\n".to_vec(), limits(10, 1000), vec!["0123456789".into()]),
        (
            b"ok\n0123456789x\n".to_vec(),
            limits(10, 1000),
            vec![
                "ok".into(),
                "refused: an event is at most 10 bytes; this connection is closed".into(),
            ],
        ),
        (format!("{big}\n").into_bytes(), limits(300_000, 300_000), vec![big.clone()]),
        (
            format!("{big}\n").into_bytes(),
            limits(300_000, 100_000),
            vec!["refused: the kernel holds 100000 bytes of unfinished lines from this \
                  generation's connections, its most; finish a line before starting another; \
                  this connection is closed"
                .into()],
        ),
    ];
    for (input, limits, want) in table {
        let budget = Budget::new(limits.buffered);
        let got = lines_of(&input, limits, &budget);
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&input[..input.len().min(40)]));
        assert_eq!(budget.free(), limits.buffered, "everything held is given back");
    }
}

#[test]
fn a_held_line_counts_until_dropped() {
    let budget = Budget::new(1 << 20);
    run(async {
        let input: &[u8] = b"hello\n";
        let mut lines = Lines::new(input, &budget, limits(100, 1 << 20));
        let Next::Line(line) = lines.next().await else { unreachable!("a line") };
        assert_eq!(budget.free(), (1 << 20) - 100, "a chunk of at most the line's bound");
        drop(line);
        assert_eq!(budget.free(), 1 << 20);
    });
}

#[test]
fn a_stalled_line_is_refused() {
    run(async {
        let (mut ours, theirs) = tokio::io::duplex(64);
        let budget = Budget::new(1000);
        let limits = Bounds { stalled: Duration::from_millis(50), ..limits(100, 1000) };
        let mut lines = Lines::new(theirs, &budget, limits);
        tokio::io::AsyncWriteExt::write_all(&mut ours, b"half a li")
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        match lines.next().await {
            Next::Refused(why) => assert!(why.contains("left unfinished"), "{why}"),
            other => unreachable!("{other:?}"),
        }
    });
}

#[test]
fn seats_are_bounded_and_given_back() {
    let seats = Seats::new(2);
    let a = seats.take();
    let b = seats.take();
    assert!(a.is_some() && b.is_some());
    assert!(seats.take().is_none(), "a third is refused");
    drop(a);
    assert!(seats.take().is_some(), "a freed seat is taken again");
}

#[test]
fn hush_table() {
    let t0 = Instant::now();
    let mut hush = Hush::new(2);
    let at = |s: u64| t0 + Duration::from_secs(s);
    let got: Vec<Option<u32>> =
        [0, 1, 2, 3, 61, 62, 63].iter().map(|s| hush.speak(at(*s))).collect();
    assert_eq!(got, vec![Some(0), Some(0), None, None, Some(2), Some(0), None]);
}
